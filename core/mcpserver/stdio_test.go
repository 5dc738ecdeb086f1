package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rlmkit/rlm/core/mcpserver"
	"github.com/rlmkit/rlm/core/server"
)

const (
	initLine        = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// stdio runs StdioTransport over pipes as `rlm mcp` does; send writes a
// line, next reads the next reply line.
func stdio(t *testing.T) (send func(string), next func() string) {
	srv := newServer(t, server.Config{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := mcpserver.New(srv, mcpserver.Options{}).Run(ctx, mcpserver.StdioTransport(inR, outW))
		// A session that ended shows as the end of its output.
		outW.CloseWithError(fmt.Errorf("the session ended: %v", err))
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		outR.Close()
		<-done
	})
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	send = func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next = func() string {
		if !lines.Scan() {
			t.Fatalf("no answer: %v", lines.Err())
		}
		return lines.Text()
	}
	send(initLine)
	if got := next(); !strings.Contains(got, `"id":1,"result"`) {
		t.Fatalf("initialize: %s", got)
	}
	send(initializedLine)
	return send, next
}

// TestStdioBadLines: each line the SDK alone would end the session on
// (with no reply) is answered with the JSON-RPC 2.0 error for it, and the
// next request is still served. Blank lines are skipped.
func TestStdioBadLines(t *testing.T) {
	t.Parallel()
	send, next := stdio(t)
	for i, c := range []struct{ line, want string }{
		{`{not json`, `"id":null,"error":{"code":-32700,"message":"parse error: the message is not JSON (invalid character 'n'`},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/list"`, `"id":null,"error":{"code":-32700,`},
		{`[]`, `"id":null,"error":{"code":-32600,"message":"invalid request: an empty batch"}`},
		{`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`, `"id":null,"error":{"code":-32600,"message":"invalid request: JSON-RPC batches are not supported`},
		{`{"jsonrpc":"1.0","id":7,"method":"tools/list"}`, `"id":7,"error":{"code":-32600,"message":"invalid request: \"jsonrpc\" must be \"2.0\""}`},
		{`{"id":"a","method":"tools/list"}`, `"id":"a","error":{"code":-32600,"message":"invalid request: \"jsonrpc\" must be \"2.0\""}`},
		{`{"JSONRPC":"2.0","id":8,"method":"ping"}`, `"id":8,"error":{"code":-32600,`},
		{`42`, `"id":null,"error":{"code":-32600,"message":"invalid request: a JSON-RPC message is an object, not 42"}`},
		{`{"jsonrpc":"2.0","id":{},"method":"ping"}`, `"id":null,"error":{"code":-32600,"message":"invalid request: the id must be a string or a number"}`},
		{`{"jsonrpc":"2.0","id":10,"method":3}`, `"id":10,"error":{"code":-32600,"message":"invalid request: the method must be a string"}`},
		{`{"jsonrpc":"2.0"}`, `"id":null,"error":{"code":-32600,"message":"invalid request: a message needs a method`},
		{`{"jsonrpc":"2.0","id":11,"error":"x"}`, `"id":11,"error":{"code":-32600,`},
		{strings.Repeat("[", 1001) + strings.Repeat("]", 1001), `"id":null,"error":{"code":-32600,"message":"invalid request: the message nests deeper than 1000 levels"}`},
	} {
		send(c.line)
		if got := next(); !strings.Contains(got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.line, got, c.want)
		}
		send("")
		send(" \r")
		id := 100 + i
		// Spaces after a message are no "trailing data" either.
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}  `, id))
		if got, want := next(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, id); got != want {
			t.Fatalf("after %s: got %s, want %s", c.line, got, want)
		}
	}
}

// TestStdioOversize: a line over the SDK's maximum (which alone ends the
// session) is read in bounded memory and answered with an error naming the
// limit; the next request is served.
func TestStdioOversize(t *testing.T) {
	t.Parallel()
	send, next := stdio(t)
	code := strings.Repeat("x", mcpserver.MaxLineLength+1<<20)
	go send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"#` + code + `"}}}`)
	if got, want := next(), `"id":null,"error":{"code":-32600,"message":"invalid request: the message is over 16777216 bytes (16 MiB), the most one line may hold`; !strings.Contains(got, want) {
		t.Fatalf("oversize line: got %s, want %s", got, want)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if got := next(); got != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Fatalf("after the oversize line: %s", got)
	}
}

// TestStdioEOF: requests piped in with stdin closed at once (printf ... |
// rlm mcp) all get their replies before Run returns; the SDK alone stops
// at the end of input and cancels the calls still running.
func TestStdioEOF(t *testing.T) {
	t.Parallel()
	srv := newServer(t, server.Config{})
	in := strings.Join([]string{
		initLine, initializedLine,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"import time; time.sleep(0.5); print(7)"}}}`,
		`{"jsonrpc":"2.0","id":"five","method":"tools/call","params":{"name":"run_code","arguments":{"language":"shell","code":"echo five"}}}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := mcpserver.New(srv, mcpserver.Options{}).Run(ctx, mcpserver.StdioTransport(strings.NewReader(in), &out))
	if err != nil && err != io.EOF {
		t.Logf("Run: %v", err)
	}
	got := out.String()
	for _, want := range []string{`"id":1,"result"`, `"id":3,"result":{`, `"id":4,"result":{"content":[{"type":"text","text":"exit code 0`, `"id":"five","result":{"content":[{"type":"text","text":"exit code 0`} {
		if !strings.Contains(got, want) {
			t.Errorf("no %s in\n%s", want, got)
		}
	}
}

// TestStdioEOFCancelled: a request the client cancelled is owed no reply,
// so the end of input does not wait for it.
func TestStdioEOFCancelled(t *testing.T) {
	t.Parallel()
	srv := newServer(t, server.Config{})
	inR, inW := io.Pipe()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.New(srv, mcpserver.Options{}).Run(context.Background(), mcpserver.StdioTransport(inR, &out))
	}()
	for _, l := range []string{
		initLine, initializedLine,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"import time; time.sleep(600)"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`,
	} {
		if _, err := io.WriteString(inW, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	inW.Close()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run still waits for a cancelled request")
	}
}
