package broker

import "errors"

// ErrNotReady means the embedded server did not accept connections in time
// (usually: the port is taken or the store directory is not writable).
var ErrNotReady = errors.New("embedded NATS server not ready")

// ErrCredsMode means a credentials file is readable by other users.
var ErrCredsMode = errors.New("credentials file is not private")

// ErrLeafAddr means the leaf listener's address is not one to listen on.
var ErrLeafAddr = errors.New("invalid leaf address")
