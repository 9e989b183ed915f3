// Package wecom is the WeCom (企业微信) edge of the relay connector: the
// callback mode of a self-built application, with WeCom's BizMsgCrypt
// scheme (msg_signature, AES-256-CBC with the EncodingAESKey, the corp id
// checked inside every plaintext), the echostr handshake, messages
// normalized into relay MessageEvents, and a client of the message API for
// replies.
//
// BizMsgCrypt is written by hand against WeCom's published scheme and
// checked against the test vectors of Tencent's own sample code; no Go
// library of it is the one WeCom's users use.
package wecom

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Crypt is BizMsgCrypt for one application: its Token, its AES key and the
// corp id every plaintext must name.
type Crypt struct {
	token  string
	key    []byte
	corpID string
}

// NewCrypt checks the 43-character EncodingAESKey (base64 of the 32-byte
// key, without its trailing "=") and returns a Crypt.
func NewCrypt(token, encodingAESKey, corpID string) (*Crypt, error) {
	if token == "" || corpID == "" {
		return nil, fmt.Errorf("wecom: token and corp id are required")
	}
	if len(encodingAESKey) != 43 {
		return nil, fmt.Errorf("wecom: EncodingAESKey must be 43 characters, not %d", len(encodingAESKey))
	}
	key, err := base64.StdEncoding.DecodeString(encodingAESKey + "=")
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("wecom: EncodingAESKey is not base64 of a 32-byte key")
	}
	return &Crypt{token: token, key: key, corpID: corpID}, nil
}

// Signature is msg_signature: hex(SHA1 of token, timestamp, nonce and the
// ciphertext, sorted as strings and concatenated).
func (c *Crypt) Signature(timestamp, nonce, encrypted string) string {
	parts := []string{c.token, timestamp, nonce, encrypted}
	slices.Sort(parts)
	sum := sha1.Sum([]byte(strings.Join(parts, "")))
	return hex.EncodeToString(sum[:])
}

// Failures of Open.
var (
	ErrForged     = errors.New("wecom: msg_signature does not verify")
	ErrCiphertext = errors.New("wecom: ciphertext does not decrypt")
	ErrCorpID     = errors.New("wecom: plaintext names another corp id")
)

// blockPad is the PKCS#7 block size BizMsgCrypt pads to.
const blockPad = 32

// Open verifies msgSignature over (timestamp, nonce, encrypted), decrypts
// encrypted and checks the corp id inside: random(16) + msg_len(4,
// big-endian) + msg + corp id. It returns msg.
func (c *Crypt) Open(msgSignature, timestamp, nonce, encrypted string) ([]byte, error) {
	want := c.Signature(timestamp, nonce, encrypted)
	if subtle.ConstantTimeCompare([]byte(strings.ToLower(msgSignature)), []byte(want)) != 1 {
		return nil, ErrForged
	}
	raw, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil || len(raw) == 0 || len(raw)%aes.BlockSize != 0 {
		return nil, ErrCiphertext
	}
	block, _ := aes.NewCipher(c.key)
	plain := make([]byte, len(raw))
	cipher.NewCBCDecrypter(block, c.key[:aes.BlockSize]).CryptBlocks(plain, raw)
	pad := int(plain[len(plain)-1])
	if pad < 1 || pad > blockPad || pad > len(plain) {
		return nil, ErrCiphertext
	}
	for _, b := range plain[len(plain)-pad:] {
		if int(b) != pad {
			return nil, ErrCiphertext
		}
	}
	plain = plain[:len(plain)-pad]
	if len(plain) < 20 {
		return nil, ErrCiphertext
	}
	n := binary.BigEndian.Uint32(plain[16:20])
	if uint64(n) > uint64(len(plain)-20) {
		return nil, ErrCiphertext
	}
	msg, receiver := plain[20:20+n], plain[20+n:]
	if subtle.ConstantTimeCompare(receiver, []byte(c.corpID)) != 1 {
		return nil, ErrCorpID
	}
	return bytes.Clone(msg), nil
}

// Seal encrypts msg the way WeCom does (random prefix from random, which is
// crypto/rand when nil) and returns the ciphertext and its msg_signature.
// The connector uses it only in tests and to answer nothing; WeCom's own
// messages are opened with Open.
func (c *Crypt) Seal(msg []byte, timestamp, nonce string, random []byte) (encrypted, signature string) {
	if random == nil {
		random = make([]byte, 16)
		_, _ = rand.Read(random)
	}
	buf := make([]byte, 0, 20+len(msg)+len(c.corpID)+blockPad)
	buf = append(buf, random[:16]...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(msg)))
	buf = append(buf, msg...)
	buf = append(buf, c.corpID...)
	pad := blockPad - len(buf)%blockPad
	buf = append(buf, bytes.Repeat([]byte{byte(pad)}, pad)...)
	block, _ := aes.NewCipher(c.key)
	cipher.NewCBCEncrypter(block, c.key[:aes.BlockSize]).CryptBlocks(buf, buf)
	encrypted = base64.StdEncoding.EncodeToString(buf)
	return encrypted, c.Signature(timestamp, nonce, encrypted)
}
