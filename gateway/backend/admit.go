package backend

import "context"

// admitKey carries a call's Admit check (WithAdmit).
type admitKey struct{}

// WithAdmit gives a call a check it must pass again when its server's
// connection is made while it waits (a warm start's, a restart's, a lazy
// server's start), once that connection's tool listing has been handed to
// Options.OnToolsChanged and before the call is sent: the caller decided
// on the definition it knew before the wait, and the listing of the new
// connection may change it (a quarantine then holds the tool). An error
// of admit ends the call unsent, as the call's error.
func WithAdmit(ctx context.Context, admit func() error) context.Context {
	return context.WithValue(ctx, admitKey{}, admit)
}

func admitFrom(ctx context.Context) func() error {
	f, _ := ctx.Value(admitKey{}).(func() error)
	return f
}

// admitted runs ctx's Admit check (WithAdmit) for a call on r when the
// caller decided before r's first listing was handed on (waited: acquire
// waited for r; or r's listing is still being handed on), after waiting
// for that hand-over. nil without a check, or when the caller decided
// after it.
func admitted(ctx context.Context, r *run, waited bool) error {
	admit := admitFrom(ctx)
	if admit == nil {
		return nil
	}
	select {
	case <-r.listed:
		if !waited {
			return nil
		}
	default:
		select {
		case <-r.listed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return admit()
}
