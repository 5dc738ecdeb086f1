package llm

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// wrapped is the one place where retries, timeouts and the concurrency
// limit live; every backend goes through it.
type wrapped struct {
	name    string
	c       completer
	sem     chan struct{} // nil: unlimited
	timeout time.Duration
	retries int
	minWait time.Duration
	maxWait time.Duration
	secret  string
	log     *slog.Logger
	sleep   func(ctx context.Context, d time.Duration) error
	now     func() time.Time
}

func wrap(name string, c completer, o Options) *wrapped {
	w := &wrapped{name: name, c: c, timeout: o.Timeout, retries: o.MaxRetries,
		minWait: o.MinBackoff, maxWait: o.MaxBackoff, secret: o.APIKey,
		log: o.Logger, sleep: o.sleep, now: o.now}
	if w.timeout <= 0 {
		w.timeout = DefaultTimeout
	}
	switch {
	case w.retries == 0:
		w.retries = DefaultMaxRetries
	case w.retries < 0:
		w.retries = 0
	}
	n := o.MaxConcurrent
	if n == 0 {
		n = DefaultMaxConcurrent
	}
	if n > 0 {
		w.sem = make(chan struct{}, n)
	}
	if w.minWait <= 0 {
		w.minWait = DefaultMinBackoff
	}
	if w.maxWait <= 0 {
		w.maxWait = DefaultMaxBackoff
	}
	if w.maxWait < w.minWait {
		w.maxWait = w.minWait
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.sleep == nil {
		w.sleep = sleepCtx
	}
	if w.now == nil {
		w.now = time.Now
	}
	if k, ok := c.(interface{ key() string }); ok && w.secret == "" {
		w.secret = k.key()
	}
	return w
}

func (w *wrapped) Name() string { return w.name }

func (w *wrapped) Complete(ctx context.Context, req Request) (Response, error) {
	if w.sem != nil {
		select {
		case w.sem <- struct{}{}:
			defer func() { <-w.sem }()
		case <-ctx.Done():
			return Response{}, scrub(classify(w.name, w.c.endpoint(), req, 0, w.timeout, ctx.Err()), w.secret)
		}
	}
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, w.timeout)
		start := time.Now()
		resp, err := w.c.complete(actx, req)
		latency := time.Since(start)
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			resp.Latency = latency
			resp.Attempts = attempt
			if resp.Model == "" {
				resp.Model = req.Model
			}
			resp.CostUSD, _ = CallCost(req.Model, resp)
			return resp, nil
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		} else if timedOut {
			err = context.DeadlineExceeded
		}
		if ctx.Err() == nil && !timedOut && attempt <= w.retries && retryable(err) {
			wait := w.backoff(attempt, err)
			w.log.Warn("llm: retrying", "provider", w.name, "model", req.Model,
				"attempt", attempt, "wait", wait, "reason", reason(err))
			if serr := w.sleep(ctx, wait); serr != nil {
				return Response{}, scrub(classify(w.name, w.c.endpoint(), req, attempt, w.timeout, serr), w.secret)
			}
			continue
		}
		return Response{}, scrub(classify(w.name, w.c.endpoint(), req, attempt, w.timeout, err), w.secret)
	}
}

// backoff is the wait before retry number n (1-based): the server's
// Retry-After (or retry-after-ms) when it sent one, else MinBackoff·2^(n-1)
// with "equal jitter" (uniform in [d/2, d]) so that concurrent callers
// spread out; always capped at MaxBackoff.
func (w *wrapped) backoff(n int, err error) time.Duration {
	var se *statusError
	if errors.As(err, &se) {
		if d, ok := retryAfter(se.header, w.now()); ok {
			return min(d, w.maxWait)
		}
	}
	d := w.minWait
	for i := 1; i < n && d < w.maxWait; i++ {
		d *= 2
	}
	d = min(d, w.maxWait)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// retryAfter reads retry-after-ms (sent by OpenAI and Anthropic) or
// Retry-After as delta-seconds or an HTTP-date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

func reason(err error) string {
	var se *statusError
	if errors.As(err, &se) {
		return "HTTP " + strconv.Itoa(se.code)
	}
	return rootCause(err).Error()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
