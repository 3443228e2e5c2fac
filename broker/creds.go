package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
)

type roleKeys struct {
	lead    nkeys.KeyPair
	leadPub string
	// workers maps each worker id to its public key.
	workers map[string]string
}

// EnsureCreds creates any missing key under dir/creds: the lead's, and
// each named worker's. orch init calls it so the lead's exists before the
// first serve.
func EnsureCreds(dir string, workers ...string) error {
	_, err := loadKeys(dir, workers)
	return err
}

// loadKeys loads the lead's key and each worker's from dir/creds (the named
// ones and every one made before), creating any that is missing. Seeds are written with mode 0600 in 0700
// directories; a seed file readable by others is refused rather than used.
func loadKeys(dir string, workers []string) (roleKeys, error) {
	k := roleKeys{workers: map[string]string{}}
	cdir := filepath.Join(dir, orchdir.Creds)
	for _, d := range []string{cdir, filepath.Join(cdir, orchdir.WorkerKeys)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return k, fmt.Errorf("credentials: %w", err)
		}
		// Never more open than searchable (0711, when workers run as
		// users of their own and must reach their key): no one else lists
		// or writes here.
		fi, err := os.Stat(d)
		if err != nil {
			return k, fmt.Errorf("credentials: %w", err)
		}
		if fi.Mode().Perm()&0o066 != 0 {
			if err := os.Chmod(d, 0o700); err != nil {
				return k, fmt.Errorf("credentials: %w", err)
			}
		}
	}
	var err error
	if k.lead, err = loadOrCreate(filepath.Join(cdir, orchdir.LeadCreds)); err != nil {
		return k, err
	}
	if k.leadPub, err = k.lead.PublicKey(); err != nil {
		return k, err
	}
	// Every worker key already made is taken too: a worker of an earlier
	// start may still run (its pane kept) with it.
	if ents, err := os.ReadDir(filepath.Join(cdir, orchdir.WorkerKeys)); err == nil {
		for _, de := range ents {
			if id, ok := strings.CutSuffix(de.Name(), ".nk"); ok && event.ValidWorker(id) && !slices.Contains(workers, id) {
				workers = append(workers, id)
			}
		}
	}
	for _, id := range workers {
		if !event.ValidWorker(id) {
			return k, fmt.Errorf("credentials: %q is not a worker id like w1", id)
		}
		kp, err := loadOrCreate(orchdir.WorkerKey(dir, id))
		if err != nil {
			return k, err
		}
		if k.workers[id], err = kp.PublicKey(); err != nil {
			return k, err
		}
	}
	return k, nil
}

func loadOrCreate(path string) (nkeys.KeyPair, error) {
	fi, err := os.Stat(path)
	if err == nil {
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("credentials: %s has mode %o: %w (run chmod 600 %s)", path, fi.Mode().Perm(), ErrCredsMode, path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(data))))
		if err != nil {
			return nil, fmt.Errorf("credentials: %s is not an NKey seed (delete it to make a new one): %w", path, err)
		}
		return kp, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	if err := writeFile0600(path, append(seed, '\n')); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return kp, nil
}
