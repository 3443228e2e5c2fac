package event

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/orch-dev/orch/internal/atomicfile"
)

// Spooled is an event read back from the spool, with the file it came from.
type Spooled struct {
	Event Event
	Path  string
}

// SpoolFile is the file name an event is spooled under: sortable by time.
func SpoolFile(e Event) string {
	return fmt.Sprintf("%019d-%s.json", e.Time.UnixNano(), e.ID)
}

// WriteSpool writes e into dir atomically: a temporary file that is synced
// and then renamed, so a reader never sees half an event. The directory is
// created with mode 0700 if missing.
func WriteSpool(dir string, e Event) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("spool %s: %w", e.ID, err)
	}
	path := filepath.Join(dir, SpoolFile(e))
	if err := atomicfile.Write(path, append(e.Marshal(), '\n'), 0o600); err != nil {
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
// the read is bounded: it is opened without following a symlink and
// without blocking (a FIFO), and only a regular file of at most MaxBytes
// is read.
func ReadSpoolFile(path string) (Spooled, error) {
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
	e, err := Parse(data)
	if err != nil {
		return Spooled{}, fmt.Errorf("spool file %s: %w", filepath.Base(path), err)
	}
	return Spooled{Event: e, Path: path}, nil
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
