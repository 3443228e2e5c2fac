package event

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/internal/atomicfile"
)

// Spooled is an event read back from the spool, with the file it came
// from and who signed it. The signature is not checked by reading: the
// reader holds the keys (Verify).
type Spooled struct {
	Event Event
	Path  string
	By    string // LeadSigner or a worker id
	raw   []byte // the event's bytes as signed
	sig   []byte
}

// LeadSigner is the signer of spool files the lead role writes (the lead
// loop's records, the orch CLI's commands); workers sign with their id.
const LeadSigner = "lead"

// SpoolSigner signs the spool files one writer makes: By names the key
// (LeadSigner or a worker id), Sign is an Ed25519 signature with it.
type SpoolSigner struct {
	By   string
	Sign func([]byte) ([]byte, error)
}

// spoolDoc is a spool file: the event exactly as it was signed, who signed
// it, and the signature.
type spoolDoc struct {
	By    string          `json:"by"`
	Sig   string          `json:"sig"`
	Event json.RawMessage `json:"event"`
}

// spoolDomain starts every signed message, so a spool signature can never
// be taken for another of the key's signatures: NATS has the key sign a
// nonce the server chose, and a nonce (a JSON string) cannot hold the
// invalid UTF-8 byte 0xff.
const spoolDomain = "\xfforch-spool-v1\x00"

func spoolMessage(raw []byte) []byte { return append([]byte(spoolDomain), raw...) }

// SpoolFile is the file name an event is spooled under: sortable by time.
func SpoolFile(e Event) string {
	return fmt.Sprintf("%019d-%s.json", e.Time.UnixNano(), e.ID)
}

// WriteSpool writes e into dir, signed by s, atomically: a temporary file
// that is synced and then renamed, so a reader never sees half an event.
// The directory is created with mode 0700 if missing.
func WriteSpool(dir string, e Event, s SpoolSigner) (string, error) {
	if s.By == "" || s.Sign == nil {
		return "", fmt.Errorf("spool %s: %w: no signer", e.ID, ErrNotKept)
	}
	raw := e.Marshal()
	sig, err := s.Sign(spoolMessage(raw))
	if err != nil {
		return "", fmt.Errorf("spool %s: sign: %w", e.ID, err)
	}
	// Written by hand, so the event's bytes in the file are the very bytes
	// signed (json.Marshal would run them through its compactor again).
	by, _ := json.Marshal(s.By)
	doc := fmt.Appendf(nil, `{"by":%s,"sig":"%s","event":%s}`, by, base64.RawURLEncoding.EncodeToString(sig), raw)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("spool %s: %w", e.ID, err)
	}
	path := filepath.Join(dir, SpoolFile(e))
	if err := atomicfile.Write(path, append(doc, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("spool %s: %w", e.ID, err)
	}
	return path, nil
}

// IsSpoolFile reports whether a name in the spool directory is a finished
// spooled event (not a temporary file of a writer still at work).
func IsSpoolFile(name string) bool {
	return strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".")
}

// MaxBytes is the largest event, on the bus (the broker's payload limit)
// and in the spool.
const MaxBytes = 64 << 10

// ReadSpoolFile reads and checks one spooled event. Whatever is at path,
// the read is bounded: only a regular file of at most MaxBytes is read,
// opened without following a symlink and without blocking (in case a FIFO
// took its place after the Lstat). The signature is not checked here: see
// Verify. A complete document without a signature is ErrUnsigned.
func ReadSpoolFile(path string) (Spooled, error) {
	if fi, err := os.Lstat(path); err != nil {
		return Spooled{}, err
	} else if !fi.Mode().IsRegular() {
		return Spooled{}, fmt.Errorf("spool file %s: %w: a %s, not a regular file", filepath.Base(path), ErrBadSpoolFile, fileKind(fi.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return Spooled{}, fmt.Errorf("spool file %s: %w: a symlink", filepath.Base(path), ErrBadSpoolFile)
	}
	if err != nil {
		return Spooled{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Spooled{}, err
	}
	if !fi.Mode().IsRegular() {
		return Spooled{}, fmt.Errorf("spool file %s: %w: a %s, not a regular file", filepath.Base(path), ErrBadSpoolFile, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxBytes {
		return Spooled{}, fmt.Errorf("spool file %s: %w: %d bytes, more than an event's %d", filepath.Base(path), ErrBadSpoolFile, fi.Size(), MaxBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return Spooled{}, err
	}
	if len(data) > MaxBytes { // grew since the stat
		return Spooled{}, fmt.Errorf("spool file %s: %w: more than an event's %d bytes", filepath.Base(path), ErrBadSpoolFile, MaxBytes)
	}
	var doc spoolDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return Spooled{}, fmt.Errorf("spool file %s: %w: %v", filepath.Base(path), ErrMalformed, err)
	}
	if len(doc.Event) == 0 || doc.By == "" || doc.Sig == "" {
		if _, err := Parse(data); err == nil {
			return Spooled{}, fmt.Errorf("spool file %s: %w: a bare event, as an orch-notify from before signed spool files wrote it (send it again)", filepath.Base(path), ErrUnsigned)
		}
		return Spooled{}, fmt.Errorf("spool file %s: %w: no signed event in it", filepath.Base(path), ErrUnsigned)
	}
	sig, err := base64.RawURLEncoding.DecodeString(doc.Sig)
	if err != nil {
		return Spooled{}, fmt.Errorf("spool file %s: %w: the signature is not base64", filepath.Base(path), ErrUnsigned)
	}
	e, err := Parse(doc.Event)
	if err != nil {
		return Spooled{}, fmt.Errorf("spool file %s: %w", filepath.Base(path), err)
	}
	return Spooled{Event: e, Path: path, By: doc.By, raw: doc.Event, sig: sig}, nil
}

// Verify checks the file's signature with pub, the public NKey of its
// signer (s.By).
func (s Spooled) Verify(pub string) error {
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return fmt.Errorf("spool file %s: %w: no usable key for %s: %v", filepath.Base(s.Path), ErrBadSignature, s.By, err)
	}
	if err := kp.Verify(spoolMessage(s.raw), s.sig); err != nil {
		return fmt.Errorf("spool file %s: %w: not signed by %s's key", filepath.Base(s.Path), ErrBadSignature, s.By)
	}
	return nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}

// Rejected is the folder of the spool where files that are not events are
// moved, each with a .why file beside it saying what was wrong.
const Rejected = "rejected"

// SetAside moves a spool file that is not an event out of the spool, into
// its rejected folder, with the reason beside it: it is kept for
// inspection, and never read again.
func SetAside(path string, why error) (string, error) {
	dir := filepath.Join(filepath.Dir(path), Rejected)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	to := filepath.Join(dir, filepath.Base(path))
	// A name set aside before (the same file copied in again) is kept:
	// the newcomer gets a numbered name beside it.
	for n := 2; ; n++ {
		_, err := os.Lstat(to)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return "", err // an unreadable folder: never loop on it
		}
		to = filepath.Join(dir, fmt.Sprintf("%s.%d", filepath.Base(path), n))
	}
	if err := os.Rename(path, to); err != nil {
		return "", err
	}
	if err := atomicfile.Write(to+".why", []byte(why.Error()+"\n"), 0o600); err != nil {
		return to, err
	}
	return to, nil
}

// ReadSpool returns every event in dir, oldest first (by event time, then
// id). Files that are not valid events are returned in bad, untouched, so
// the caller can report them and set them aside; they are never silently
// dropped.
func ReadSpool(dir string) (good []Spooled, bad []BadSpool, err error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read spool: %w", err)
	}
	for _, de := range ents {
		if de.IsDir() || !IsSpoolFile(de.Name()) {
			continue
		}
		path := filepath.Join(dir, de.Name())
		s, err := ReadSpoolFile(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) { // taken meanwhile
				bad = append(bad, BadSpool{Path: path, Err: err})
			}
			continue
		}
		good = append(good, s)
	}
	SortOldestFirst(good)
	return good, bad, nil
}

// BadSpool is a file of the spool that is not an event, and why.
type BadSpool struct {
	Path string
	Err  error
}

// SortOldestFirst orders spooled events by event time, then id.
func SortOldestFirst(s []Spooled) {
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i].Event, s[j].Event
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		return a.ID < b.ID
	})
}

// CheckWorkerFile checks a spool file a worker signed as what the bus
// would take from that worker: the signature with its public key pub, a
// worker's kind of event, naming that worker.
func (s Spooled) CheckWorkerFile(pub string) error {
	if err := s.Verify(pub); err != nil {
		return err
	}
	name := filepath.Base(s.Path)
	if IsCommand(s.Event.Kind) {
		return fmt.Errorf("spool file %s: %w: signed by worker %s, but %s is the lead's kind of event", name, ErrNotSignersEvent, s.By, s.Event.Kind)
	}
	if s.Event.Worker != s.By {
		return fmt.Errorf("spool file %s: %w: signed by worker %s, but it names worker %q", name, ErrNotSignersEvent, s.By, s.Event.Worker)
	}
	return nil
}
