// Package exitcode holds kubectl-hyperbatch's exit codes and the error that carries one, so scripts
// can tell "the command failed" from "the command found something" (docs/cli.md, Exit codes).
package exitcode

import (
	"errors"
	"fmt"
)

// The exit codes.
const (
	// OK: the command ran and found nothing that needs attention.
	OK = 0
	// Failed: the command could not run (cluster unreachable, forbidden, bad kubeconfig).
	Failed = 1
	// Usage: bad arguments or flags; --help says how to call it.
	Usage = 2
	// NotFound: the object the command was asked about does not exist.
	NotFound = 3
	// Attention: the command ran and found something to act on: policies with a conflict or not
	// Ready (policies), a gang that is not placed (why).
	Attention = 4
)

// Error is an error with the exit code it ends the command with.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Usagef is a usage error.
func Usagef(format string, args ...any) error {
	return &Error{Code: Usage, Err: fmt.Errorf(format, args...)}
}

// NotFoundf is a not-found error.
func NotFoundf(format string, args ...any) error {
	return &Error{Code: NotFound, Err: fmt.Errorf(format, args...)}
}

// Attentionf ends a command that printed its report with code Attention; its message goes to stderr.
func Attentionf(format string, args ...any) error {
	return &Error{Code: Attention, Err: fmt.Errorf(format, args...)}
}

// Of is the exit code an error ends the command with: OK for nil, the Error's code, else Failed.
func Of(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Failed
}
