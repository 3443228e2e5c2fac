package verify

import "errors"

// ErrRounds is a number of rounds other than 1 or 3.
var ErrRounds = errors.New("rounds must be 1 or 3")
