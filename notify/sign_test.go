package notify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestSignerMatchesNkeys(t *testing.T) {
	makers := []func() (nkeys.KeyPair, error){nkeys.CreateUser, nkeys.CreateAccount, nkeys.CreateServer}
	for i := 0; i < 60; i++ {
		kp, err := makers[i%len(makers)]()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		s, err := newSigner(seed)
		if err != nil {
			t.Fatal(err)
		}
		if pub, _ := kp.PublicKey(); s.pub != pub {
			t.Fatalf("public key %s, nkeys says %s", s.pub, pub)
		}
		msg := make([]byte, i*7)
		rand.Read(msg)
		got, err := s.Sign(msg)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := kp.Sign(msg)
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d, message of %d bytes: signature %x, nkeys gives %x", i, len(msg), got, want)
		}
		if err := kp.Verify(msg, got); err != nil || !ed25519.Verify(s.pubRaw[:], msg, got) {
			t.Fatalf("signature does not verify: %v", err)
		}
	}
}

func TestSignerRefusesBadSeeds(t *testing.T) {
	curve, _ := nkeys.CreateCurveKeys()
	curveSeed, _ := curve.Seed()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	for _, seed := range [][]byte{nil, []byte("SUAnotaseed"), curveSeed, []byte(pub)} {
		if _, err := newSigner(seed); !errors.Is(err, ErrNoCreds) {
			t.Errorf("newSigner(%q) = %v, want ErrNoCreds", seed, err)
		}
	}
}
