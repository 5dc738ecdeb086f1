package python

import (
	"os"
	"sync"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/plugin/program"
	"github.com/rlmkit/rlm/core/plugin/toolpath"
	"github.com/rlmkit/rlm/plugins/python/internal/forkserver"
)

// forkPool decides when programs run through the fork server. A plugin
// that serves one run (rlm exec) never starts it: that would cost an extra
// interpreter. From the second run on (rlm serve, the daemon) it is started
// in the background, and runs use it once it is up; until then, and
// whenever it has died, they start python as usual.
type forkPool struct {
	mu       sync.Mutex
	runs     int
	starting bool
	srv      *forkserver.Server
	exe      string
}

func (f *forkPool) spawner(t toolpath.Tool, p core.Program) program.Spawner {
	if iso := p.Limits.Isolation; iso != "none" {
		return nil
	}
	if os.Getenv("RLM_PYTHON_FORKSERVER") == "0" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs++
	if f.srv != nil && f.exe == t.Exe && f.srv.Alive() {
		return f.srv
	}
	if f.srv != nil && (!f.srv.Alive() || f.exe != t.Exe) {
		old := f.srv
		f.srv = nil
		go old.Close()
	}
	if f.runs >= 2 && !f.starting {
		f.starting = true
		go func() {
			srv, err := forkserver.Start(t.Exe, program.BaseEnv(os.TempDir()))
			f.mu.Lock()
			defer f.mu.Unlock()
			f.starting = false
			if err == nil {
				f.srv, f.exe = srv, t.Exe
			}
		}()
	}
	return nil
}
