package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// A Checkpoint anchors the chains outside the database, as Certificate
// Transparency's signed tree heads do: for each tenant, the seq and hash of
// the last record of its verified chain, the time, and an Ed25519 signature.
// A chain that later no longer reaches a checkpoint's record (records
// removed from the end, a head rewound, a history rewritten and re-hashed)
// fails VerifyWith. The signature makes a checkpoint file unforgeable by
// whoever can write the database but not the key.
type Checkpoint struct {
	Version   int    `json:"version"`
	CreatedAt string `json:"created_at"`
	// KeyID is the first 16 hex digits of sha256(public key).
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"` // base64 of the 32-byte Ed25519 public key
	Heads     []End  `json:"heads"`
	Signature string `json:"signature"` // base64 of the Ed25519 signature of SignedBytes
}

// CheckpointVersion is the only checkpoint format.
const CheckpointVersion = 1

// checkpointDomain prefixes the signed bytes, so a checkpoint signature can
// never be mistaken for a signature of anything else.
const checkpointDomain = "caduceus-audit-checkpoint/v1\n"

// Name identifies a checkpoint in messages: its time and key id.
func (c *Checkpoint) Name() string { return c.CreatedAt + " (key " + c.KeyID + ")" }

// SignedBytes are what the signature covers: the domain line and the
// canonical JSON of the checkpoint without its signature.
func (c *Checkpoint) SignedBytes() ([]byte, error) {
	u := *c
	u.Signature = ""
	b, err := json.Marshal(struct {
		Version   int    `json:"version"`
		CreatedAt string `json:"created_at"`
		KeyID     string `json:"key_id"`
		PublicKey string `json:"public_key"`
		Heads     []End  `json:"heads"`
	}{u.Version, u.CreatedAt, u.KeyID, u.PublicKey, u.Heads})
	if err != nil {
		return nil, err
	}
	canon, err := contract.CanonicalJSON(json.RawMessage(b))
	if err != nil {
		return nil, err
	}
	return append([]byte(checkpointDomain), canon...), nil
}

// KeyIDOf is the key id of a public key.
func KeyIDOf(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Sign makes a checkpoint of ends (sorted by tenant) at now.
func Sign(key ed25519.PrivateKey, ends []End, now time.Time) (Checkpoint, error) {
	pub := key.Public().(ed25519.PublicKey)
	heads := slices.Clone(ends)
	if heads == nil {
		heads = []End{}
	}
	slices.SortFunc(heads, func(a, b End) int { return strings.Compare(string(a.Tenant), string(b.Tenant)) })
	c := Checkpoint{
		Version:   CheckpointVersion,
		CreatedAt: contract.Timestamp(now),
		KeyID:     KeyIDOf(pub),
		PublicKey: base64.StdEncoding.EncodeToString(pub),
		Heads:     heads,
	}
	msg, err := c.SignedBytes()
	if err != nil {
		return Checkpoint{}, err
	}
	c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
	return c, nil
}

// ParseCheckpoint decodes a checkpoint document (strictly: the shared input
// rule, no unknown fields) and checks its signature against trusted. With
// trusted nil the checkpoint's own public key is used, which proves only
// that the file is intact, not who made it.
func ParseCheckpoint(b []byte, trusted ed25519.PublicKey) (Checkpoint, error) {
	var c Checkpoint
	if err := contract.CheckJSON(b); err != nil {
		return c, fmt.Errorf("audit: checkpoint: %w", err)
	}
	if err := contract.DecodeStrict(b, &c); err != nil {
		return c, fmt.Errorf("audit: checkpoint: %w", err)
	}
	if c.Version != CheckpointVersion {
		return c, fmt.Errorf("audit: checkpoint: version %d, want %d", c.Version, CheckpointVersion)
	}
	pub, err := base64.StdEncoding.DecodeString(c.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return c, errors.New("audit: checkpoint: public_key is not a base64 Ed25519 public key")
	}
	if trusted != nil && !bytes.Equal(pub, trusted) {
		return c, fmt.Errorf("audit: checkpoint %s was signed by key %s, not by the trusted key %s", c.CreatedAt, c.KeyID, KeyIDOf(trusted))
	}
	if c.KeyID != KeyIDOf(pub) {
		return c, fmt.Errorf("audit: checkpoint %s: key_id does not match its public key", c.CreatedAt)
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil {
		return c, fmt.Errorf("audit: checkpoint %s: signature is not base64", c.CreatedAt)
	}
	msg, err := c.SignedBytes()
	if err != nil {
		return c, err
	}
	if !ed25519.Verify(pub, msg, sig) {
		return c, fmt.Errorf("audit: checkpoint %s: the signature does not verify: the checkpoint was altered", c.Name())
	}
	for _, h := range c.Heads {
		if !contract.ValidTenantSlot(string(h.Tenant)) || h.Seq < 1 {
			return c, fmt.Errorf("audit: checkpoint %s: bad head %s seq %d", c.Name(), h.Tenant, h.Seq)
		}
	}
	return c, nil
}

// EnvSigningKey names the environment variable that may hold the signing
// key (base64 or hex of the 32-byte Ed25519 seed).
const EnvSigningKey = "CADUCEUS_AUDIT_SIGNING_KEY"

// SigningKeyFile is the key's file name inside the data directory.
const SigningKeyFile = "audit-signing.key"

// ParseSigningKey decodes a 32-byte Ed25519 seed written as base64 or hex.
func ParseSigningKey(s string) (ed25519.PrivateKey, error) {
	s = strings.TrimSpace(s)
	var seed []byte
	if b, err := hex.DecodeString(s); err == nil && len(b) == ed25519.SeedSize {
		seed = b
	} else if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == ed25519.SeedSize {
		seed = b
	} else {
		return nil, errors.New("audit: the signing key must be a 32-byte Ed25519 seed in base64 or hex")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// LoadSigningKey returns the checkpoint signing key: from env (the value
// of EnvSigningKey) when set, else from dataDir/audit-signing.key, which is
// created (mode 0600) when create is true and it does not exist. found is
// false when there is no key and create is false.
func LoadSigningKey(env, dataDir string, create bool) (key ed25519.PrivateKey, found bool, err error) {
	if env != "" {
		k, err := ParseSigningKey(env)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", EnvSigningKey, err)
		}
		return k, true, nil
	}
	path := filepath.Join(dataDir, SigningKeyFile)
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := ParseSigningKey(string(b))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return k, true, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if !create {
		return nil, false, nil
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // made by a concurrent process
		return LoadSigningKey("", dataDir, false)
	}
	if err != nil {
		return nil, false, err
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(seed) + "\n"); err != nil {
		f.Close()
		return nil, false, err
	}
	if err := f.Close(); err != nil {
		return nil, false, err
	}
	return ed25519.NewKeyFromSeed(seed), true, nil
}

// WriteCheckpointFile writes c to path atomically (a temporary file in the
// same directory, then a rename), so a reader never sees half a checkpoint.
func WriteCheckpointFile(path string, c Checkpoint) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".checkpoint-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
