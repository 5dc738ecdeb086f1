package servecmd

import (
	"fmt"
	"net"
	"os"

	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/core/server"
)

// registerReplicaFlags adds --advertise-addr and --replica (see replica).
func (o *Options) registerReplicaFlags(fl *pflag.FlagSet) {
	fl.StringVar(&o.AdvertiseAddr, "advertise-addr", "", "run as one of several replicas behind a load balancer: host:port where the other replicas reach this one (in Kubernetes $(POD_IP):8080); session ids then name their replica and any replica forwards a call to the session's own (env RLM_ADVERTISE_ADDR)")
	fl.StringVar(&o.Replica, "replica", "", "this replica's name in messages, such as its pod name (env RLM_REPLICA; default: the host name)")
}

// replica is the server's Replica from --advertise-addr (or
// RLM_ADVERTISE_ADDR), nil without one. Replicas sign the route in their
// session ids with the token, so that a client cannot make a replica
// forward to an address of its choosing: a replica needs one.
func (o *Options) replica(token string) (*server.Replica, error) {
	addr := flagOrEnv(o.Changed, "advertise-addr", o.AdvertiseAddr, "RLM_ADVERTISE_ADDR")
	if addr == "" {
		return nil, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" || port == "0" {
		return nil, fmt.Errorf("--advertise-addr %q: give the host:port the other replicas reach this one at, such as 10.1.2.3:8080 ($(POD_IP):8080 in a Kubernetes manifest)", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("--advertise-addr %q: %s is every interface, not an address others can reach: give this replica's own address, such as $(POD_IP):%s", addr, host, port)
	}
	if token == "" {
		return nil, fmt.Errorf("--advertise-addr needs a token (RLM_TOKEN): replicas sign the route in session ids with it, so that no client can make one forward calls to an address of its choosing")
	}
	name := flagOrEnv(o.Changed, "replica", o.Replica, "RLM_REPLICA")
	if name == "" {
		name, _ = os.Hostname()
	}
	if name == "" {
		name = addr
	}
	return &server.Replica{Name: name, Addr: addr, Key: token}, nil
}

// flagOrEnv is a string flag's value when given, else the environment's.
func flagOrEnv(changed func(string) bool, flag, value, env string) string {
	if changed != nil && changed(flag) {
		return value
	}
	return os.Getenv(env)
}
