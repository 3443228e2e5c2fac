package notify

import (
	"crypto/sha512"
	"fmt"

	"filippo.io/edwards25519"
	"github.com/nats-io/nkeys"
)

// signer answers the server's NKey challenge: an Ed25519 signature (RFC
// 8032) of the nonce with the role's seed, byte for byte what nkeys'
// KeyPair.Sign returns.
//
// It exists for start-up time. crypto/ed25519 (under nkeys) computes R = rB
// and the public key A = aB with a table of 256 multiples of B that it
// builds on first use: 1–1.5 ms of a short-lived orch-notify's CPU, for two
// multiplications. ScalarMult on the generator needs no table (constant
// time as well, about 0.1 ms for both here). Everything else is the
// standard's: SHA-512, and edwards25519, the package crypto/ed25519's
// internal one was copied from.
type signer struct {
	pub    string   // the NKey public key, "U..." for a user seed
	pubRaw [32]byte // A, encoded
	a      *edwards25519.Scalar
	prefix [32]byte // second half of SHA-512(seed), hashed into each nonce
}

// newSigner decodes an NKey seed. Curve (xkey) seeds are refused: they do
// not sign.
func newSigner(seed []byte) (*signer, error) {
	pfx, raw, err := nkeys.DecodeSeed(seed)
	if err != nil || pfx == nkeys.PrefixByteCurve {
		return nil, fmt.Errorf("%w: the seed is not a valid NKey seed", ErrNoCreds)
	}
	h := sha512.Sum512(raw)
	a, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCreds, err)
	}
	s := &signer{a: a}
	copy(s.prefix[:], h[32:])
	copy(s.pubRaw[:], new(edwards25519.Point).ScalarMult(a, edwards25519.NewGeneratorPoint()).Bytes())
	pub, err := nkeys.Encode(pfx, s.pubRaw[:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCreds, err)
	}
	s.pub = string(pub)
	return s, nil
}

// Sign is RFC 8032's Ed25519 signature of msg: r = H(prefix || msg),
// R = rB, k = H(R || A || msg), S = r + k·a.
func (s *signer) Sign(msg []byte) ([]byte, error) {
	h := sha512.New()
	h.Write(s.prefix[:])
	h.Write(msg)
	var digest [sha512.Size]byte
	r, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		return nil, err
	}
	sig := make([]byte, 0, 64)
	sig = append(sig, new(edwards25519.Point).ScalarMult(r, edwards25519.NewGeneratorPoint()).Bytes()...)
	h.Reset()
	h.Write(sig)
	h.Write(s.pubRaw[:])
	h.Write(msg)
	k, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		return nil, err
	}
	return append(sig, edwards25519.NewScalar().MultiplyAdd(k, s.a, r).Bytes()...), nil
}
