package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "github.com/rlmkit/rlm/core/runtimepb"
)

// worker is one open Session stream on a plugin: one interpreter with its
// helpers loaded. A single reader goroutine owns Recv, so a worker that
// dies while idle in the pool is noticed at once (Done closes).
type worker struct {
	stream pb.Runtime_SessionClient
	cancel context.CancelFunc
	opened *pb.Opened
	// gen is the generation of the plugin process serving it: a worker of
	// an older one (the binary was rebuilt since) is not handed out.
	gen int

	// in carries what the plugin sends after Opened, in order.
	in   chan *pb.SessionResponse
	done chan struct{}
	err  error // why it ended; read after done is closed

	sendMu sync.Mutex
	once   sync.Once

	// The idle prober runs until claim; see probeIdle.
	stopProbe chan struct{}
	probeDone chan struct{}
	probeID   uint64
}

var errWorkerClosed = errors.New("worker closed")

// openWorker starts a session with open on c and waits for it to be ready
// (Opened). ctx bounds the start; the session lives until Close.
func openWorker(ctx context.Context, c pb.RuntimeClient, open *pb.OpenSession) (*worker, error) {
	stream, cancel, opened, err := pb.StartSession(ctx, c, open)
	if err != nil {
		return nil, err
	}
	w := &worker{stream: stream, cancel: cancel, opened: opened, in: make(chan *pb.SessionResponse, 16), done: make(chan struct{})}
	go w.read()
	return w, nil
}

// probeInterval is how often an idle worker is asked whether its
// interpreter is still there.
const probeInterval = 500 * time.Millisecond

// probeIdle checks, while the worker waits in the pool, that its
// interpreter still answers: a plugin only notices a dead interpreter at
// the next request, and a client must never get a worker whose first cell
// fails for that. A failed or unanswered probe ends the worker, so the
// pool replaces it (and counts it as crashed). claim stops the prober
// before the worker is used.
func (w *worker) probeIdle() {
	w.stopProbe = make(chan struct{})
	w.probeDone = make(chan struct{})
	go func() {
		defer close(w.probeDone)
		t := time.NewTicker(probeInterval)
		defer t.Stop()
		for {
			select {
			case <-w.stopProbe:
				return
			case <-w.done:
				return
			case <-t.C:
			}
			if err := w.probe(); err != nil {
				w.end(fmt.Errorf("idle worker failed its health check: %w", err))
				return
			}
		}
	}()
}

// probe reads a variable that every session has (none at all is fine: the
// answer, not its content, shows the interpreter is alive).
func (w *worker) probe() error {
	w.probeID++
	id := 1<<62 + w.probeID
	if err := w.send(&pb.SessionRequest{Msg: &pb.SessionRequest_GetVariable{GetVariable: &pb.GetVariable{
		Id: id, Name: "__name__"}}}); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		m, err := w.next(ctx)
		if err != nil {
			return err
		}
		if v := m.GetVariable(); v != nil && v.GetId() == id {
			if v.GetError() != "" {
				return errors.New(v.GetError())
			}
			return nil
		}
	}
}

// claim stops the idle prober (waiting for a probe in flight) so that the
// new owner has the stream to itself.
func (w *worker) claim() error {
	if w.stopProbe != nil {
		close(w.stopProbe)
		<-w.probeDone
		w.stopProbe = nil
	}
	return w.Err()
}

func (w *worker) read() {
	for {
		m, err := w.stream.Recv()
		if err != nil {
			w.end(fmt.Errorf("the runtime ended the session: %w", err))
			return
		}
		select {
		case w.in <- m:
		case <-w.done:
			return
		}
		if e := m.GetError(); e != nil && e.GetFatal() {
			w.end(errors.New(e.GetMessage()))
			return
		}
	}
}

func (w *worker) end(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.done)
		w.cancel()
	})
}

func (w *worker) send(m *pb.SessionRequest) error {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	select {
	case <-w.done:
		return w.err
	default:
	}
	return w.stream.Send(m)
}

// Done is closed when the worker has ended.
func (w *worker) Done() <-chan struct{} { return w.done }

// Close kills the worker: cancelling the stream makes the plugin end the
// session and its interpreter's process group.
func (w *worker) Close() error {
	w.end(errWorkerClosed)
	return nil
}

// Err says why the worker ended (nil while it runs).
func (w *worker) Err() error {
	select {
	case <-w.done:
		return w.err
	default:
		return nil
	}
}

// runCell executes code as one cell and returns its result. Callbacks are
// refused: a program run has no model to ask. The worker is not closed.
func (w *worker) runCell(ctx context.Context, code string, timeout time.Duration) (*pb.Result, error) {
	const id = 1
	if err := w.send(&pb.SessionRequest{Msg: &pb.SessionRequest_Execute{Execute: &pb.Execute{
		Id: id, Code: []byte(code), TimeoutMs: pb.WireMs(timeout)}}}); err != nil {
		return nil, fmt.Errorf("the daemon's worker is gone: %w", err)
	}
	for {
		m, err := w.next(ctx)
		if err != nil {
			return nil, err
		}
		switch x := m.GetMsg().(type) {
		case *pb.SessionResponse_Result:
			if x.Result.GetId() == id {
				return x.Result.GetResult(), nil
			}
		case *pb.SessionResponse_Callback:
			_ = w.send(&pb.SessionRequest{Msg: &pb.SessionRequest_CallbackReply{CallbackReply: &pb.CallbackReply{
				CallId: x.Callback.GetCallId(),
				Error:  x.Callback.GetKind() + " is not available to a program run; use a session (rlm run)",
			}}})
		case *pb.SessionResponse_Error:
			if x.Error.GetFatal() {
				return nil, fmt.Errorf("the daemon's worker failed: %s", x.Error.GetMessage())
			}
		}
	}
}

// next returns the plugin's next message. Messages the plugin sent before
// the stream ended are delivered before the end is reported.
func (w *worker) next(ctx context.Context) (*pb.SessionResponse, error) {
	select {
	case m := <-w.in:
		return m, nil
	default:
	}
	select {
	case m := <-w.in:
		return m, nil
	case <-w.done:
		select {
		case m := <-w.in:
			return m, nil
		default:
		}
		return nil, fmt.Errorf("the daemon's worker died: %v", w.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
