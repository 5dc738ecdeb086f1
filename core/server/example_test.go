package server_test

import (
	"context"
	"log"
	"log/slog"
	"net/http"
	"os"

	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/core/server"
	"github.com/rlmkit/rlm/internal/host/launch"
)

// Mounting the sandbox server in a program's own mux, under /sandbox/.
func ExampleNew() {
	opts := client.Options{Plugins: launch.DefaultSearchPath(nil, nil)}
	open := func(ctx context.Context, name string) (*client.Runtime, error) {
		return client.Open(ctx, name, opts)
	}
	// Fail at start, with a reason, when python cannot run here.
	modes, rts, _, err := server.OpenModes(context.Background(), open, []string{"python"})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(server.Config{
		Modes:    modes,
		Open:     open,
		Runtimes: rts,
		Token:    os.Getenv("SANDBOX_TOKEN"),
		Logger:   slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	mux := http.NewServeMux()
	mux.Handle("/sandbox/", http.StripPrefix("/sandbox", srv))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}
