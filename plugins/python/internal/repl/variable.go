package repl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

type varReply struct {
	Found bool   `json:"found"`
	JSON  string `json:"json"`
}

// Variable reads a global of the session as JSON. found is false when the
// name is not defined (None is found, with "null"). A value JSON cannot
// encode comes back as a JSON string holding its repr (at most 1 MiB).
func (p *Process) Variable(ctx context.Context, name string) (found bool, jsonValue string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, err := p.ensure(ctx)
	if err != nil {
		return false, "", err
	}
	p.nextID++
	id := p.nextID
	idStr := strconv.FormatUint(id, 10)
	if err := d.send(request{JSONRPC: "2.0", ID: id, Method: "get_variable", Params: map[string]string{"name": name}}, nil); err != nil {
		return false, "", p.lost(d, err)
	}
	for {
		select {
		case m, ok := <-d.msgs:
			if !ok {
				return false, "", p.lost(d, errors.New("the interpreter's channel closed"))
			}
			if m.Method == "callback" {
				p.callback(ctx, d, m, nil)
				continue
			}
			if string(m.ID) != idStr {
				continue
			}
			if m.Error != nil {
				return false, "", fmt.Errorf("repl: get_variable %q: %s", name, m.Error.Message)
			}
			var r varReply
			if err := json.Unmarshal(m.Result, &r); err != nil {
				return false, "", fmt.Errorf("repl: get_variable %q: bad reply: %w", name, err)
			}
			return r.Found, r.JSON, nil
		case <-d.exited:
			return false, "", p.lost(d, errors.New("the interpreter exited"))
		case <-ctx.Done():
			return false, "", ctx.Err()
		case <-p.closing:
			return false, "", ErrClosed
		}
	}
}

// lost restarts after the driver died outside a cell.
func (p *Process) lost(d *inst, cause error) error {
	d.kill()
	d.closeStreams()
	desc, _, _ := d.exitDescription()
	err := fmt.Errorf("repl: %w (%s); the interpreter was restarted and the session state was lost", cause, desc)
	if rerr := p.restart(); rerr != nil {
		err = fmt.Errorf("%w; restarting it failed: %v", err, rerr)
	}
	return err
}
