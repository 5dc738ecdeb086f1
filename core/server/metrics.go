package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics live in the Server's own registry, so two servers in one process
// (or a library user's own metrics) never collide.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	results  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	queue    prometheus.Gauge
	capacity prometheus.Gauge
	sessions prometheus.Gauge
	rejected prometheus.Counter
	restarts *prometheus.CounterVec
	h        http.Handler
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlm_serve_requests_total",
		Help: "HTTP requests answered, by route, HTTP status code and language.",
	}, []string{"route", "code", "language"})
	m.results = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rlm_serve_executions_total",
		Help: "Programs and session cells run, by language and result status (success, error, timeout, ...).",
	}, []string{"language", "status"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rlm_serve_request_duration_seconds",
		Help:    "Time to answer a request, by route.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"route"})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "rlm_serve_in_flight", Help: "Runs and cells executing now."})
	m.queue = prometheus.NewGauge(prometheus.GaugeOpts{Name: "rlm_serve_queue_depth", Help: "Requests waiting for a run slot."})
	m.capacity = prometheus.NewGauge(prometheus.GaugeOpts{Name: "rlm_serve_capacity", Help: "Run slots (max concurrent runs)."})
	m.sessions = prometheus.NewGauge(prometheus.GaugeOpts{Name: "rlm_serve_sessions", Help: "Open REPL sessions."})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "rlm_serve_rejected_total", Help: "Requests answered 429 because every slot was busy and the queue full."})
	m.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rlm_serve_runtime_restarts_total", Help: "Runtime plugins launched again after they died."}, []string{"language"})
	m.reg.MustRegister(m.requests, m.results, m.duration, m.inFlight, m.queue, m.capacity, m.sessions, m.rejected, m.restarts,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.h = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) handler() http.Handler { return m.h }

func (m *metrics) observe(route string, code int, language, result string, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code), language).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
	if result != "" {
		m.results.WithLabelValues(language, result).Inc()
	}
}
