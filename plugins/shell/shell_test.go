package shell

import (
	"context"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/core/plugin"
	"github.com/rlmkit/rlm/core/plugin/plugintest"
	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// The service is plain Go: these call it in-process, without a plugin.

func TestRunProgramMode(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("RLM_TEST_SECRET", "hunter2")
	res, err := New().Run(context.Background(), core.Program{
		Code: `read -r l; echo "in=$l args=$*"; echo "k=$K secret=${RLM_TEST_SECRET:-none}"
cat sub/dir/data.txt; echo made > out.txt; echo more >> sub/dir/data.txt; echo "$PWD" > /dev/stderr; exit 3`,
		Files:       []core.File{{Path: "sub/dir/data.txt", Data: []byte("data\n")}},
		Stdin:       []byte("hello\n"),
		Args:        []string{"a", "b c"},
		Env:         map[string]string{"K": "v"},
		ReturnFiles: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "in=hello args=a b c\nk=v secret=none\ndata\n"
	if res.Stdout != want {
		t.Errorf("stdout %q, want %q", res.Stdout, want)
	}
	if res.ExitCode != 3 || res.EndedBy != ending.Exit {
		t.Errorf("exit %d ended_by %v, want 3 exit", res.ExitCode, res.EndedBy)
	}
	files := map[string]string{}
	for _, f := range res.Files {
		files[f.Path] = f.Change + ":" + string(f.Data)
	}
	if files["out.txt"] != "created:made\n" || files["sub/dir/data.txt"] != "modified:data\nmore\n" || len(files) != 2 {
		t.Errorf("files %v", files)
	}
	wd := strings.TrimSpace(res.Stderr)
	if _, err := os.Stat(wd); !os.IsNotExist(err) {
		t.Errorf("working directory %s still exists (%v)", wd, err)
	}
}

func TestRunRejectsEscapingNames(t *testing.T) {
	// Through the adapter, which turns the runtime's plugin.Invalid into
	// the code the host reads as a refusal.
	srv := plugin.NewServer(New())
	for _, name := range []string{"../x", "/etc/x", "a/../../x", ""} {
		_, err := srv.Run(context.Background(), &pb.RunRequest{Code: []byte("true"), Files: []*pb.File{{Path: name}}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("file %q: got %v, want InvalidArgument", name, err)
		}
	}
}

func TestInfo(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	info, err := New().Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !info.Available || !strings.HasPrefix(info.RuntimeVersion, "GNU bash, version ") {
		t.Errorf("info %v", info)
	}
	t.Setenv("PATH", t.TempDir())
	info, _ = New().Info(context.Background())
	if info.Available || info.UnavailableReason != "'bash' not found in PATH" {
		t.Errorf("without bash: available=%v reason=%q", info.Available, info.UnavailableReason)
	}
}

// The shell runtime keeps the contract every runtime's Run keeps, through
// the adapter (plugintest.CheckRun).
func TestRunContract(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := plugin.NewServer(New())
	run := func(ctx context.Context, p core.Program) (*core.Result, error) {
		res, err := srv.Run(ctx, pb.ProgramProto(p))
		if err != nil {
			return nil, pb.Error(err)
		}
		return pb.ResultFromProto(res), nil
	}
	plugintest.CheckRun(t, run, plugintest.Programs{
		Hello:     `echo hello; echo oops >&2`,
		Exit3:     `exit 3`,
		Echo:      `cat; echo "$RLM_CHECK"`,
		WriteFile: `printf data > out.txt`,
		Spin:      `while :; do :; done`,
	})
}
