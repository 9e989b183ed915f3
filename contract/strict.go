package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailingData is DecodeStrict's refusal of anything but white space
// after the JSON value.
var ErrTrailingData = errors.New("data after the JSON value")

// DecodeStrict decodes the one JSON value of b into v: a member v has no
// field for is refused, and so is anything but white space after the
// value (ErrTrailingData). Any other error is encoding/json's. Every
// strict decoder of the program is this one; callers wrap its error in
// their own words.
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailingData
	}
	return nil
}
