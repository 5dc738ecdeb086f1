package repl

import (
	"bufio"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rlmkit/rlm/internal/sandbox/capbuf"
	"github.com/rlmkit/rlm/plugins/internal/pycell"
)

//go:embed driver.py
var driverPy string

// driverSource is what the interpreter runs: the cell semantics shared with
// the WebAssembly REPL (plugins/internal/pycell), then driver.py.
var driverSource = pycell.Source + "\n" + driverPy

// bootstrap runs the embedded driver under the file name <rlm-driver>, which
// the driver uses to cut its own frames out of user tracebacks. It keeps the
// code object in _rlm_code so the driver can hand it back marshalled.
const bootstrap = "import sys;_rlm_code=compile(sys.argv[1],'<rlm-driver>','exec');exec(_rlm_code)"

// bootstrapCached runs the driver's marshalled code object, read from fd 6:
// compiling the driver costs ~7 ms a start, unmarshalling ~0.1 ms.
// The trailing comment names the process <rlm-driver> in ps, as bootstrap's
// argument does.
const bootstrapCached = "import os,marshal;f=os.fdopen(6,'rb');_rlm_code=marshal.loads(f.read());f.close();exec(_rlm_code)#<rlm-driver>"

// codeKey identifies an interpreter binary; marshalled code is only valid for
// the exact interpreter that produced it.
type codeKey struct {
	path        string
	size, mtime int64
}

// codeCache maps codeKey to the marshalled driver code.
var codeCache sync.Map

func interpreterKey(python string) (codeKey, bool) {
	st, err := os.Stat(python)
	if err != nil {
		return codeKey{}, false
	}
	return codeKey{path: python, size: st.Size(), mtime: st.ModTime().UnixNano()}, true
}

// maxFrame bounds one protocol frame from the driver (a variable's JSON).
const maxFrame = 1 << 30

// rpcMsg is one JSON-RPC 2.0 message in either direction.
type rpcMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// inst is one incarnation of the driver process. A Process replaces its inst
// when the interpreter is restarted.
type inst struct {
	proc  Proc
	tag   string
	toW   *os.File // host -> driver (fd 3 in the driver)
	intrW int      // interrupt notes (fd 5 in the driver), non-blocking
	wmu   sync.Mutex
	out   *stream
	err   *stream
	msgs  chan *rpcMsg // frames from the driver; closed at EOF

	cached bool    // started from the marshalled code cache
	key    codeKey // the interpreter, for the cache
	keyOK  bool

	exited   chan struct{} // closed once proc.Wait returned
	exit     Exit          // how it ended, once exited is closed
	killOnce sync.Once
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func setPipeSize(f *os.File, size int) {
	_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, size)
}

// spawn starts a driver. It does not wait for it to be ready; see open.
// useCache runs the marshalled driver when one is cached for the
// interpreter.
func spawn(cfg *Config, useCache bool) (*inst, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	reqR, reqW, err1 := pipe()
	respR, respW, err2 := pipe()
	outR, outW, err3 := pipe()
	errR, errW, err4 := pipe()
	// the interrupt-note pipe: raw non-blocking write end, so a note can
	// never block the host
	var ifds [2]int
	err5 := unix.Pipe2(ifds[:], unix.O_CLOEXEC|unix.O_NONBLOCK)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		closeAll()
		if err5 == nil {
			unix.Close(ifds[0])
			unix.Close(ifds[1])
		}
		return nil, fmt.Errorf("repl: pipes: %w", err)
	}
	intrR := os.NewFile(uintptr(ifds[0]), "intr")
	files = append(files, intrR)
	intrW := ifds[1]
	// Bigger pipes: fewer wake-ups for large contexts and outputs.
	setPipeSize(reqW, 1<<20)
	setPipeSize(outW, 1<<20)
	setPipeSize(errW, 1<<20)

	tag := randomHex(12)
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(env[:len(env):len(env)], tagEnv+"="+tag)

	key, keyOK := interpreterKey(cfg.Python)
	var code []byte
	if v, ok := codeCache.Load(key); ok && keyOK && useCache {
		code = v.([]byte)
	}
	var argv []string
	var codeR, codeW *os.File
	if code != nil {
		var err error
		if codeR, codeW, err = pipe(); err != nil {
			closeAll()
			return nil, fmt.Errorf("repl: pipes: %w", err)
		}
		setPipeSize(codeW, len(code)+4096)
		argv = []string{cfg.Python, "-c", bootstrapCached}
	} else {
		argv = []string{cfg.Python, "-c", bootstrap, driverSource}
	}
	extra := []*os.File{reqR, respW, intrR}
	if codeR != nil {
		extra = append(extra, codeR)
	}
	launch := cfg.Launch
	if launch == nil {
		launch = ChildLauncher(tag, cfg.Rlimits)
	}
	proc, err := launch(argv, env, cfg.Dir, extra, outW, errW)
	if err != nil {
		closeAll()
		unix.Close(intrW)
		return nil, err
	}
	// the child's ends
	reqR.Close()
	respW.Close()
	intrR.Close()
	outW.Close()
	errW.Close()
	if codeR != nil {
		codeR.Close()
		go func() { // fits the pipe: does not block in practice
			_, _ = codeW.Write(code)
			codeW.Close()
		}()
	}

	d := &inst{
		proc:   proc,
		tag:    tag,
		toW:    reqW,
		intrW:  intrW,
		out:    newStream(outR, cfg.MaxOutputBytes),
		err:    newStream(errR, cfg.MaxOutputBytes),
		msgs:   make(chan *rpcMsg, 16),
		exited: make(chan struct{}),
		cached: code != nil,
		key:    key,
		keyOK:  keyOK,
	}
	go func() {
		d.exit = proc.Wait()
		close(d.exited)
	}()
	go d.readFrames(respR)
	return d, nil
}

func (d *inst) readFrames(r *os.File) {
	defer close(d.msgs)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxFrame {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		m := new(rpcMsg)
		if err := json.Unmarshal(body, m); err != nil {
			continue // not ours to crash on; the waiter will time out or see EOF
		}
		d.msgs <- m
	}
}

// send writes one framed message, followed by raw (the open request's
// context bytes), as a single ordered unit.
func (d *inst) send(m any, raw []byte) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	buf := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	buf = append(buf, body...)
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := d.toW.Write(buf); err != nil {
		return err
	}
	if len(raw) > 0 {
		if _, err := d.toW.Write(raw); err != nil {
			return err
		}
	}
	return nil
}

type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      uint64 `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type response struct {
	JSONRPC string    `json:"jsonrpc"`
	ID      any       `json:"id"`
	Result  any       `json:"result,omitempty"`
	Error   *rpcError `json:"error,omitempty"`
}

// kill kills the driver's process group and every process attributed to
// it, waits for the driver to be reaped, and reaps the rest it can.
func (d *inst) kill() {
	d.killOnce.Do(func() {
		d.proc.Kill()
		<-d.exited
		d.toW.Close()
		unix.Close(d.intrW)
		d.intrW = -1
	})
}

// drain waits, bounded, for both output pipes to reach EOF (after the
// driver died or was killed) and returns what they hold.
func (d *inst) drain(limit time.Duration) (out, errc *capbuf.Buffer) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for _, s := range []*stream{d.out, d.err} {
		select {
		case <-s.eof:
		case <-t.C:
		}
	}
	return d.out.take(), d.err.take()
}

// exitDescription says how the driver process ended; valid once exited is
// closed.
func (d *inst) exitDescription() (desc, signal string, code int32) {
	return d.exit.Desc, d.exit.Signal, d.exit.Code
}

// errOpenRejected: the driver ran and refused the open request (a bad
// context), as opposed to failing to start.
var errOpenRejected = errors.New("repl: opening the session")

type openParams struct {
	ContextBytes *int   `json:"context_bytes,omitempty"`
	Kind         string `json:"kind,omitempty"`
	WantCode     bool   `json:"want_code,omitempty"`
}

type openResult struct {
	Python string `json:"python"`
	Pid    int    `json:"pid"`
	Code   []byte `json:"code"` // marshalled driver, when asked for
}

// open sends the context and waits for the driver to answer. On failure the
// driver is killed and the error carries what it wrote to stderr.
func (d *inst) open(ctx context.Context, c *contextData) (*openResult, error) {
	p := openParams{WantCode: !d.cached && d.keyOK}
	var raw []byte
	if c != nil {
		n := len(c.data)
		p.ContextBytes = &n
		p.Kind = c.kind
		raw = c.data
	}
	sendErr := make(chan error, 1)
	go func() { // may block on a large context until the driver reads it
		sendErr <- d.send(request{JSONRPC: "2.0", ID: 0, Method: "open", Params: p}, raw)
	}()
	fail := func(err error) (*openResult, error) {
		d.kill()
		_, e := d.drain(500 * time.Millisecond)
		if s := strings.TrimSpace(string(e.Bytes())); s != "" {
			err = fmt.Errorf("%w\n%s", err, s)
		}
		return nil, err
	}
	for {
		select {
		case m, ok := <-d.msgs:
			if !ok {
				d.kill()
				desc, _, _ := d.exitDescription()
				return fail(fmt.Errorf("repl: python driver failed to start (%s)", desc))
			}
			if string(m.ID) != "0" {
				continue
			}
			if m.Error != nil {
				return fail(fmt.Errorf("%w: %s", errOpenRejected, m.Error.Message))
			}
			var r openResult
			if err := json.Unmarshal(m.Result, &r); err != nil {
				return fail(fmt.Errorf("repl: bad open reply: %w", err))
			}
			if len(r.Code) > 0 && p.WantCode {
				codeCache.Store(d.key, r.Code)
			}
			// whatever the interpreter printed while starting (site hooks)
			// is not a cell's output
			d.out.take()
			d.err.take()
			return &r, nil
		case err := <-sendErr:
			if err != nil {
				return fail(fmt.Errorf("repl: sending the context: %w", err))
			}
			sendErr = nil
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}

// interrupt raises KeyboardInterrupt in the given cell: a note naming the
// cell, then SIGINT.
func (d *inst) interrupt(cell int) {
	if d.intrW < 0 {
		return
	}
	var note [4]byte
	binary.BigEndian.PutUint32(note[:], uint32(cell))
	_, _ = unix.Write(d.intrW, note[:]) // a full pipe (impossible in practice) only loses the note
	if pid := d.proc.Pid(); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGINT)
	}
}

// closeStreams closes the output pipes' read ends, ending their readers even
// if some process we could not kill still holds the write ends.
func (d *inst) closeStreams() {
	d.out.f.Close()
	d.err.f.Close()
}
