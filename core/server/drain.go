package server

// Draining in two steps, for servers behind a load balancer (a Kubernetes
// Service, a cloud load balancer): the balancer keeps sending new
// connections for a while after the process is told to stop (kube-proxy
// removes an endpoint up to about a second after SIGTERM, cloud balancers
// take longer), so a server that refuses work at once loses those
// requests. Unready is the first step: /health answers 503 so readiness
// probes fail and the balancer takes the replica out, while every request
// that still arrives is served as usual. Drain is the second: new work is
// refused with 503 shutting_down and the HTTP server's Shutdown lets
// in-flight and queued work finish. `rlm serve --drain-grace` puts the
// time between the two.

// Unready makes /health answer 503 ("draining") while requests keep being
// served; see the note above. Drain (or Close) ends the service.
func (s *Server) Unready() { s.unready.Store(true) }

// healthDraining says why /health reports unavailable while the server
// drains, or "" when it does not.
func (s *Server) healthDraining() string {
	switch {
	case s.draining.Load():
		return "shutting down"
	case s.unready.Load():
		return "draining: this replica is stopping and takes no new work once the balancer has noticed; requests still arriving are served"
	}
	return ""
}
