package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"
)

// Sessions across replicas (docs/kubernetes.md, issue 31). A session is a
// live interpreter in one process, so behind a Service that spreads
// connections over several replicas, half the calls of a session reach a
// replica that does not hold it. Of the ways out, this is the one that
// needs nothing from the platform: an id names the replica that holds the
// session (its name, the address its peers reach it at, and which run of
// it: a replica restarted at the same address is another one), signed so
// that no client can make a replica forward to an address of its choosing,
// and any replica forwards a call for another's session there. Affinity
// (sessionAffinity: ClientIP) pins every client behind one proxy or
// gateway to one pod and breaks when endpoints change; a shared registry
// would still have to reach the owner, as the state cannot move. When
// the owner is gone (it does not answer, or a new run of it does) the call
// is 410 session_ended naming the replica and the cause, never 404: the id
// was valid, its state is gone with its replica.

// Replica makes session ids name this replica; see the note above.
type Replica struct {
	// Name is how messages name the replica (a pod name).
	Name string
	// Addr is host:port where the other replicas reach this one.
	Addr string
	// Key signs the route in an id; every replica must have the same.
	Key string
}

// ForwardedHeader marks a call one replica forwarded to another, which
// answers it itself or says the session is gone, never forwards it again.
const ForwardedHeader = "X-RLM-Forwarded-By"

// forwardDialTimeout bounds reaching the owner; a replica whose node is
// gone drops packets rather than refusing, and only this tells.
const forwardDialTimeout = 5 * time.Second

// route is where a session lives, as its id says.
type route struct {
	name, addr, run string
}

// replicaRouting is the Server's part of the note above; nil when the
// server is not a replica.
type replicaRouting struct {
	self  route
	key   []byte
	proxy *httputil.ReverseProxy
}

func newReplicaRouting(r Replica) (*replicaRouting, error) {
	if r.Addr == "" || r.Key == "" {
		return nil, errors.New("server: Replica needs Addr and Key")
	}
	if _, _, err := net.SplitHostPort(r.Addr); err != nil {
		return nil, fmt.Errorf("server: Replica.Addr %q is not host:port: %w", r.Addr, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	rr := &replicaRouting{
		self: route{name: r.Name, addr: r.Addr, run: hex.EncodeToString(b[:])},
		key:  []byte(r.Key),
	}
	dialer := &net.Dialer{Timeout: forwardDialTimeout}
	rr.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			to := pr.In.Context().Value(forwardTo{}).(route)
			pr.SetURL(&url.URL{Scheme: "http", Host: to.addr})
			pr.Out.Header.Set(ForwardedHeader, rr.self.name)
		},
		Transport: &http.Transport{
			DialContext:         dialer.DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			to := r.Context().Value(forwardTo{}).(route)
			id := r.Context().Value(forwardID{}).(string)
			// A call that failed on a kept-alive connection (the owner died
			// since it was last used) says nothing yet: a fresh dial tells
			// a replica that is gone from one that is not.
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "dial" {
				if c, derr := dialer.DialContext(r.Context(), "tcp", to.addr); derr != nil {
					errors.As(derr, &op)
				} else {
					c.Close()
				}
			}
			if op != nil && op.Op == "dial" {
				writeError(w, apiErr(http.StatusGone, CodeSessionEnded, fmt.Sprintf(
					"session %s lives on replica %s (%s), which is gone (%v): its state went with it; open a new session (POST /sessions)", id, to.name, to.addr, op.Err)))
				return
			}
			writeError(w, &APIError{Status: http.StatusBadGateway, Code: "replica_unreachable", RetryAfter: 1, Message: fmt.Sprintf(
				"session %s lives on replica %s (%s), which stopped answering this call (%v); the session may still be there: retry", id, to.name, to.addr, err)})
		},
	}
	return rr, nil
}

type forwardTo struct{}
type forwardID struct{}

// suffix is what follows the random part of every session id this
// replica makes: ".ROUTE.MAC".
func (rr *replicaRouting) suffix() string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(rr.self.name + "\x00" + rr.self.addr + "\x00" + rr.self.run))
	return "." + payload + "." + rr.mac(payload)
}

func (rr *replicaRouting) mac(payload string) string {
	m := hmac.New(sha256.New, rr.key)
	m.Write([]byte("rlm session route\x00" + payload))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// routeOf reads the route in a session id; false for an id without one
// (made by a server that is not a replica) or with a signature this key
// did not make.
func (rr *replicaRouting) routeOf(id string) (route, bool) {
	parts := strings.Split(id, ".")
	if len(parts) != 3 || !hmac.Equal([]byte(rr.mac(parts[1])), []byte(parts[2])) {
		return route{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return route{}, false
	}
	f := bytes.Split(raw, []byte{0})
	if len(f) != 3 {
		return route{}, false
	}
	return route{name: string(f[0]), addr: string(f[1]), run: string(f[2])}, true
}

// elsewhere answers a call naming a session another replica holds:
// forwarded to it, or 410 when it is gone. nil when the session is (or
// was) this replica's, or the id names no replica: the local handlers
// answer.
func (s *Server) elsewhere(r *http.Request, id string) http.HandlerFunc {
	rr := s.replica
	if rr == nil {
		return nil
	}
	to, ok := rr.routeOf(id)
	if !ok || to == rr.self {
		return nil
	}
	if to.addr == rr.self.addr || r.Header.Get(ForwardedHeader) != "" {
		// The owner's address answers, but as another run (a restart, or a
		// new pod that got the address), or a forwarded call reached a
		// replica that is not its owner: either way the owner is gone.
		return func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, apiErr(http.StatusGone, CodeSessionEnded, fmt.Sprintf(
				"session %s lives on replica %s (%s), which is gone: replica %s (%s) answers at that address now; its state went with it; open a new session (POST /sessions)",
				id, to.name, to.addr, rr.self.name, rr.self.addr)))
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(context.WithValue(r.Context(), forwardTo{}, to), forwardID{}, id)
		rr.proxy.ServeHTTP(w, r.WithContext(ctx))
	}
}
