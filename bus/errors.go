package bus

import "errors"

// ErrNotSay means a message on the bus is not a say its subject vouches
// for: not an event, another kind, or one naming another worker than the
// credential that sent it.
var ErrNotSay = errors.New("not a say")
