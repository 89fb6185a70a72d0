package pluginapi

import (
	"errors"
	"fmt"
)

// ErrPluginExited is wrapped by the errors a Handler returned by Dispense
// reports when the plugin process is gone (it crashed, was killed, or its
// connection broke) rather than the handler having answered.
var ErrPluginExited = errors.New("plugin exited")

// errorKind classifies a handler error. It survives the plugin boundary.
type errorKind int

const (
	kindUnspecified errorKind = iota
	kindRetryable
	kindPermanent
)

// kindError marks an error as retryable or permanent. Its message is the
// wrapped error's, unchanged.
type kindError struct {
	kind errorKind
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// Retryable marks err as transient: running the same request again later
// may succeed (a remote service was down, a resource was busy). It returns
// nil for a nil err.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kindRetryable, err: err}
}

// Permanent marks err as one that running the same request again cannot
// fix (a missing interpreter, a malformed URL). It returns nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kindPermanent, err: err}
}

// InvalidParamsError is a field-level validation error of a job's params.
// Build it with InvalidParams; find it with AsInvalidParams. It is
// permanent.
type InvalidParamsError struct {
	field string
	msg   string
}

// InvalidParams reports that the params field named field (a JSON object
// key, dotted for nested fields; "" for the params as a whole) is invalid,
// with a message for the person who edits the job.
func InvalidParams(field, msg string) error {
	return &InvalidParamsError{field: field, msg: msg}
}

// Field is the offending params field, "" for the params as a whole.
func (e *InvalidParamsError) Field() string { return e.field }

// Message is the human-readable reason, without the field.
func (e *InvalidParamsError) Message() string { return e.msg }

func (e *InvalidParamsError) Error() string {
	if e.field == "" {
		return "invalid params: " + e.msg
	}
	return fmt.Sprintf("invalid params: %s: %s", e.field, e.msg)
}

// AsInvalidParams finds an InvalidParamsError in err's chain.
func AsInvalidParams(err error) (*InvalidParamsError, bool) {
	var ip *InvalidParamsError
	if errors.As(err, &ip) {
		return ip, true
	}
	return nil, false
}

// IsRetryable reports whether err's chain holds an error marked Retryable.
func IsRetryable(err error) bool { return kindOf(err) == kindRetryable }

// IsPermanent reports whether err's chain holds an error marked Permanent
// or an InvalidParamsError.
func IsPermanent(err error) bool {
	if _, ok := AsInvalidParams(err); ok {
		return true
	}
	return kindOf(err) == kindPermanent
}

// kindOf is the kind of the outermost kindError in err's chain.
func kindOf(err error) errorKind {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	return kindUnspecified
}
