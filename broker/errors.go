package broker

import "errors"

// ErrNotReady means the embedded server did not accept connections in time
// (usually: the port is taken or the store directory is not writable).
var ErrNotReady = errors.New("embedded NATS server not ready")

// ErrCredsMode means a credentials file is readable by other users.
var ErrCredsMode = errors.New("credentials file is not private")

// ErrUpstreamConfig means an --nats URL, --nats-domain or --creds value
// cannot be used.
var ErrUpstreamConfig = errors.New("external NATS cluster misconfigured")

// ErrUpstream means the external cluster's JetStream did not answer through
// the leaf link in time.
var ErrUpstream = errors.New("external NATS cluster not reachable")

// ErrReplicas means the external cluster cannot place the stream's replicas.
var ErrReplicas = errors.New("cluster cannot place the stream's replicas")

// ErrLeafAddr means the leaf listener's address is not one to listen on.
var ErrLeafAddr = errors.New("invalid leaf address")
