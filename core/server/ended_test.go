package server_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// A session that has ended answers 410 session_ended, saying how it
// ended, on every later call (not only the one that saw it end), whether
// it was deleted, expired or its interpreter failed; an id that never
// existed stays 404.
func TestEndedSessionIsGone(t *testing.T) {
	f := &fakeRuntime{name: "fake"}
	mock := f.mock()
	// A session whose interpreter dies at its first cell: the stream ends
	// with an error, as when the plugin's interpreter is killed.
	fresh := mock.SessionF
	mock.SessionF = func(stream pb.Runtime_SessionServer) error {
		first, err := stream.Recv()
		if err != nil || first.GetOpen() == nil {
			return errors.New("want open first")
		}
		if ctx := first.GetOpen().GetContext(); ctx == nil || string(ctx.GetData()) != "die" {
			return fresh(&replayFirst{stream, first})
		}
		if err := stream.Send(&pb.SessionResponse{Msg: &pb.SessionResponse_Opened{Opened: &pb.Opened{RuntimeVersion: "Fake 1.0"}}}); err != nil {
			return err
		}
		if _, err := stream.Recv(); err != nil {
			return err
		}
		return errors.New("the interpreter was killed")
	}
	cfg := fakeConfig(t, f)
	cfg.Open = mockOpener(t, mock, nil)
	cfg.SessionIdle = 300 * time.Millisecond
	url, _ := start(t, cfg)

	gone := func(what, id, why string) {
		t.Helper()
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/sessions/" + id + "/execute", `{"code": "echo"}`},
			{"GET", "/sessions/" + id + "/variables/x", ""},
			{"DELETE", "/sessions/" + id, ""},
		} {
			r := call(t, c.method, url+c.path, c.body)
			if r.status != 410 || r.errCode() != "session_ended" || !strings.Contains(r.errMsg(), id) || !strings.Contains(r.errMsg(), why) {
				t.Errorf("%s: %s %s: %d %s, want 410 session_ended saying %q", what, c.method, c.path, r.status, r.raw, why)
			}
		}
	}

	deleted := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	if r := call(t, "DELETE", url+"/sessions/"+deleted, ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	gone("deleted", deleted, "was deleted")

	dead := call(t, "POST", url+"/sessions", `{"context": "die"}`).body["id"].(string)
	if r := call(t, "POST", url+"/sessions/"+dead+"/execute", `{"code": "echo"}`); r.status != 410 || !strings.Contains(r.errMsg(), "killed") {
		t.Fatalf("the cell its interpreter died in: %d %s", r.status, r.raw)
	}
	gone("interpreter died", dead, "interpreter failed")

	expired := call(t, "POST", url+"/sessions", `{}`).body["id"].(string)
	waitFor(t, "the idle session to expire", func() bool {
		return call(t, "GET", url+"/health", "").body["sessions"] == 0.0
	})
	gone("expired", expired, "expired after 300ms idle")

	if r := call(t, "POST", url+"/sessions/0123abcd/execute", `{"code": "echo"}`); r.status != 404 || r.errCode() != "session_not_found" {
		t.Errorf("an id that never existed: %d %s", r.status, r.raw)
	}
}

// replayFirst gives a session handler back the open message its wrapper
// already read.
type replayFirst struct {
	pb.Runtime_SessionServer
	first *pb.SessionRequest
}

func (r *replayFirst) Recv() (*pb.SessionRequest, error) {
	if m := r.first; m != nil {
		r.first = nil
		return m, nil
	}
	return r.Runtime_SessionServer.Recv()
}
