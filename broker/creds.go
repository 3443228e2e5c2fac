package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"
	"github.com/orch-dev/orch/internal/orchdir"
)

type roleKeys struct {
	lead, worker       nkeys.KeyPair
	leadPub, workerPub string
}

// EnsureCreds creates any missing role key under dir/creds. orch init calls
// it so the files exist before the first serve.
func EnsureCreds(dir string) error {
	_, err := loadKeys(dir)
	return err
}

// loadKeys loads the role keys from dir/creds, creating any that is
// missing. Seeds are written with mode 0600 in a 0700 directory; a seed file
// readable by others is refused rather than used.
func loadKeys(dir string) (roleKeys, error) {
	var k roleKeys
	cdir := filepath.Join(dir, orchdir.Creds)
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		return k, fmt.Errorf("credentials: %w", err)
	}
	if err := os.Chmod(cdir, 0o700); err != nil {
		return k, fmt.Errorf("credentials: %w", err)
	}
	var err error
	if k.lead, err = loadOrCreate(filepath.Join(cdir, orchdir.LeadCreds)); err != nil {
		return k, err
	}
	if k.worker, err = loadOrCreate(filepath.Join(cdir, orchdir.WorkerCreds)); err != nil {
		return k, err
	}
	if k.leadPub, err = k.lead.PublicKey(); err != nil {
		return k, err
	}
	if k.workerPub, err = k.worker.PublicKey(); err != nil {
		return k, err
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
