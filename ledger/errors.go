package ledger

import "errors"

// ErrMalformed means a line of LEDGER.jsonl is not a record Load understands;
// the error names the line.
var ErrMalformed = errors.New("malformed record")

// ErrBadEntry means Append was given an entry with an invalid field (a
// check_by that is not YYYY-MM-DD, a direction other than lower or higher).
var ErrBadEntry = errors.New("invalid entry")

// ErrBadOutcome means an outcome other than won or lost (or open, for a new
// bet).
var ErrBadOutcome = errors.New("outcome must be won or lost")

// ErrNoEntry means no entry has the given id.
var ErrNoEntry = errors.New("no such entry")

// ErrNotBet means the entry names no metric, so there is nothing to settle.
var ErrNotBet = errors.New("entry is not a bet")

// ErrSettled means the bet already has an outcome.
var ErrSettled = errors.New("bet already settled")

// ErrEdited means LEDGER.jsonl has an uncommitted change to a line already
// committed: the ledger is append-only, so orch appends nothing to it
// until the change is committed or undone.
var ErrEdited = errors.New("LEDGER.jsonl is edited")
