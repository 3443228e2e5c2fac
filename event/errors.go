package event

import "errors"

// ErrMalformed means a document is not a valid event: bad JSON, an unknown
// schema version or kind, a missing plan, an invalid id or worker id.
var ErrMalformed = errors.New("malformed event")

// ErrNotKept means an event could be neither published nor spooled.
var ErrNotKept = errors.New("event not kept")

// ErrBadPlanName means a plan name breaks the contract's rule. Its text
// reads inside a sentence: `plan name "x" is invalid: ...`.
var ErrBadPlanName = errors.New("invalid")

// ErrBadSpoolFile means a file in the spool is not one a writer of the
// spool makes: not a regular file (a FIFO, a device, a symlink), or
// larger than any event. It is never read.
var ErrBadSpoolFile = errors.New("not a spooled event")

// ErrUnsigned means a spool file holds no signed event: written by hand,
// or by an orch-notify from before spool files were signed. It is never
// taken.
var ErrUnsigned = errors.New("spool file not signed")

// ErrBadSignature means a spool file's signature is not its signer's: the
// event was changed after it was signed, or signed with another key.
var ErrBadSignature = errors.New("bad spool signature")

// ErrNotSignersEvent means a signed spool file holds an event its signer
// may not send (a worker's file with the lead's kind of event, or naming
// another worker).
var ErrNotSignersEvent = errors.New("not this signer's to send")
