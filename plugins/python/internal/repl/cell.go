package repl

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
	"github.com/rlmkit/rlm/internal/sandbox/capbuf"
	"github.com/rlmkit/rlm/internal/sandbox/watchdog"
	"github.com/rlmkit/rlm/plugins/internal/pycell"
)

// Running a cell: the request, the watchdog over it, and how it ended
// (finished, interrupted, killed after the grace period, crashed, closed).

type execParams struct {
	Code   string `json:"code"`
	Cell   int    `json:"cell"`
	Marker string `json:"marker"`
	// MaxValue caps the result's repr in bytes, as output is capped.
	MaxValue int64 `json:"max_value"`
}

type cellReply struct {
	ExitCode    int32   `json:"exit_code"`
	Error       string  `json:"error"`
	Interrupted bool    `json:"interrupted"`
	MarkerOut   bool    `json:"marker_out"`
	MarkerErr   bool    `json:"marker_err"`
	Value       *string `json:"value"`
}

// Execute runs code as the next cell. timeout <= 0 means no timeout. cb
// serves the cell's llm_query / rlm_query calls; nil makes them raise
// "llm_query is not available: this session has no LLM configured".
//
// The error is non-nil only when the cell could not be run at all (session
// closed, interpreter cannot be started); everything that happens to the
// cell itself is described by the Result.
func (p *Process) Execute(ctx context.Context, code string, timeout time.Duration, cb CallbackFunc) (*core.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.ensure(ctx)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil { // do not start a cell that is already cancelled
		return &core.Result{EndedBy: ending.Cancelled, ExitCode: 130, Error: "cancelled before the cell started: " + ctx.Err().Error()}, nil
	}
	p.cell++
	cell := p.cell
	p.nextID++
	id := p.nextID
	idStr := strconv.FormatUint(id, 10)
	// unguessable (a random per-process secret) and unique (the cell number)
	marker := "\x1e<rlm-cell-end:" + p.secret + ":" + strconv.Itoa(cell) + ">\x1e"
	d.out.arm([]byte(marker))
	d.err.arm([]byte(marker))
	p.setRunning(true)
	defer p.setRunning(false)

	cbCtx, cbCancel := context.WithCancel(ctx)
	defer cbCancel()

	start := time.Now()
	if err := d.send(request{JSONRPC: "2.0", ID: id, Method: "execute", Params: execParams{Code: code, Cell: cell, Marker: marker, MaxValue: p.cfg.MaxOutputBytes}}, nil); err != nil {
		return p.crashed(d, start, "sending the cell failed: "+err.Error())
	}

	// The watchdog ends the cell at its deadline or the caller's cancel;
	// Interrupt asks it too. The loop interrupts the driver itself, so a
	// cell whose reply it has read is never interrupted; one that ignores
	// KeyboardInterrupt for Grace is killed (Expired).
	w := watchdog.Start(ctx, watchdog.Options{Timeout: timeout, Grace: p.cfg.Grace})
	defer w.Done()
	var (
		why        ending.Reason // set once the cell was interrupted
		reply      *cellReply
		outC, errC *capbuf.Buffer
		stopping   = w.Stopping()
	)
	for reply == nil || (outC == nil && reply.MarkerOut) || (errC == nil && reply.MarkerErr) {
		select {
		case m, ok := <-d.msgs:
			if !ok {
				return p.crashed(d, start, "")
			}
			if m.Method == "callback" {
				p.callback(cbCtx, d, m, cb)
				continue
			}
			if string(m.ID) != idStr {
				continue // a stale reply
			}
			if m.Error != nil {
				reply = &cellReply{ExitCode: 1, Error: "driver error: " + m.Error.Message}
				outC, errC = d.out.take(), d.err.take()
				continue
			}
			r := new(cellReply)
			if err := json.Unmarshal(m.Result, r); err != nil {
				r = &cellReply{ExitCode: 1, Error: "driver error: bad reply: " + err.Error()}
			}
			reply = r
			if !r.MarkerOut && outC == nil {
				outC = d.out.take()
			}
			if !r.MarkerErr && errC == nil {
				errC = d.err.take()
			}
		case c := <-d.out.done:
			outC = c
		case c := <-d.err.done:
			errC = c
		case <-p.intr:
			w.Stop(ending.Cancelled)
		case why = <-stopping:
			stopping = nil
			d.interrupt(cell)
			cbCancel()
		case <-w.Expired():
			if why == "" { // the grace began before the loop took the cause
				why = w.Why()
			}
			return p.hardKill(d, start, why, w.Message(why))
		case <-d.exited:
			return p.crashed(d, start, "")
		case <-p.closing:
			return p.closedUnder(d, start)
		}
	}
	res := buildResult(outC, errC, start)
	res.ExitCode = int(reply.ExitCode)
	res.Error = reply.Error
	res.Value = reply.Value
	res.EndedBy = watchdog.Ending(why)
	if why != "" {
		msg := pycell.Error(why, w.Message(why))
		if reply.Interrupted {
			res.Signal = "SIGINT"
			res.Error = msg + "; KeyboardInterrupt was raised in the cell and the session state was kept"
		} else if reply.Error != "" {
			res.Error = msg + "; the cell then ended with " + reply.Error
		} else {
			res.Error = msg + "; the cell then finished"
		}
	}
	return res, nil
}

// closedUnder ends a cell whose session was closed under it.
func (p *Process) closedUnder(d *inst, start time.Time) (*core.Result, error) {
	d.kill()
	oc, ec := d.drain(100 * time.Millisecond)
	d.closeStreams()
	p.d = nil
	res := buildResult(oc, ec, start)
	res.EndedBy = ending.Cancelled
	res.StateLost = true
	res.Signal = "SIGKILL"
	res.ExitCode = 128 + int(syscall.SIGKILL)
	res.Error = "session closed while the cell was running"
	return res, nil
}

func buildResult(outC, errC *capbuf.Buffer, start time.Time) *core.Result {
	dur := time.Since(start)
	res := &core.Result{DurationMs: dur.Milliseconds(), Duration: dur}
	if outC != nil {
		res.Stdout, res.StdoutOmitted = string(outC.Bytes()), outC.Omitted()
	}
	if errC != nil {
		res.Stderr, res.StderrOmitted = string(errC.Bytes()), errC.Omitted()
	}
	return res
}

// restart replaces a dead or killed driver; on failure p.d stays nil and
// the next call tries again.
func (p *Process) restart() error {
	p.d = nil
	if p.isClosed() {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.startInst(ctx)
}

// hardKill handles a cell that ignored its interrupt for the grace period.
func (p *Process) hardKill(d *inst, start time.Time, why ending.Reason, msg string) (*core.Result, error) {
	d.kill()
	oc, ec := d.drain(250 * time.Millisecond)
	d.closeStreams()
	res := buildResult(oc, ec, start)
	res.EndedBy = why
	res.StateLost = true
	res.Signal = "SIGKILL"
	res.ExitCode = 128 + int(syscall.SIGKILL)
	res.Error = fmt.Sprintf("%s; the cell did not stop within %s of KeyboardInterrupt, so the interpreter was killed and restarted (session state lost)",
		pycell.Error(why, msg), p.cfg.Grace)
	if err := p.restart(); err != nil {
		res.Error += "; restarting it failed: " + err.Error()
	}
	return res, nil
}

// exitWait bounds how long crashed waits for a driver whose channel broke
// to exit by itself. A sandbox's pid 1 reports the interpreter's exit a
// moment after the channel closes; killing it sooner would report every
// os._exit(3) as SIGKILL. It is paid in full only when the channel broke
// and the interpreter lives on.
const exitWait = 2 * time.Second

// crashed handles a driver that died (or whose channel broke) mid-cell.
func (p *Process) crashed(d *inst, start time.Time, detail string) (*core.Result, error) {
	t := time.NewTimer(exitWait)
	select {
	case <-d.exited:
	case <-t.C:
	}
	t.Stop()
	d.kill()
	oc, ec := d.drain(250 * time.Millisecond)
	d.closeStreams()
	desc, sig, code := d.exitDescription()
	res := buildResult(oc, ec, start)
	res.EndedBy = ending.Crashed
	if d.exit.EndedBy != "" {
		res.EndedBy = d.exit.EndedBy // the sandbox's memory or process limit killed it
	}
	res.StateLost = true
	res.Signal = sig
	res.ExitCode = int(code)
	res.Error = fmt.Sprintf("the Python interpreter died during the cell (%s); it was restarted and the session state was lost", desc)
	if detail != "" {
		res.Error += " (" + detail + ")"
	}
	if err := p.restart(); err != nil {
		res.Error += "; restarting it failed: " + err.Error()
	}
	return res, nil
}
