package server

import (
	"net/http"

	"github.com/rlmkit/rlm/core"
)

// sessionBridges gives a new session its bridges: its own from
// Config.SessionBridges (a fresh model budget for each session, warm ones
// included), else the shared Config.Bridges.
func (s *Server) sessionBridges(model string) (core.Bridges, *APIError) {
	if s.cfg.SessionBridges == nil {
		if e := s.checkSessionModel(model); e != nil {
			return core.Bridges{}, e
		}
		return s.cfg.Bridges, nil
	}
	b, err := s.cfg.SessionBridges(model)
	if err != nil {
		return core.Bridges{}, badField("model", "%s", err.Error())
	}
	return b, nil
}

// checkSessionModel refuses a session's model choice the server cannot
// honour, before the session cap is looked at (a server without
// SessionBridges has no models to choose among).
func (s *Server) checkSessionModel(model string) *APIError {
	if model == "" {
		return nil
	}
	if s.cfg.SessionBridges == nil {
		return apiErr(http.StatusBadRequest, CodeBadField, "field model: this server gives its sessions no model to choose; its operator gives one with --provider (and --allow-model), or [run] provider in rlm.toml")
	}
	if _, err := s.cfg.SessionBridges(model); err != nil {
		return badField("model", "%s", err.Error())
	}
	return nil
}
