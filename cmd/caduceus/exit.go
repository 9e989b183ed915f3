package main

import (
	"encoding/json"
	"io"

	"github.com/caduceus-dev/caduceus/gate/registry"
)

// How a command ends: an exit code, and an error as the operator reads it.

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// userMessage is an error as an operator should read it: the contract
// error's own message, internal detail included (this is the operator's
// terminal, not a remote caller).
func userMessage(err error) string { return registry.UserMessage(err) }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printJSONLines writes each of list as one line of JSON.
func printJSONLines[T any](w io.Writer, list []T) error {
	enc := json.NewEncoder(w)
	for _, v := range list {
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}
