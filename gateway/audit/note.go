package audit

import "context"

// A call's record says who ran which tool, and of its arguments only a
// hash (unless audit.arguments is "masked"), so the record of a management
// tool that changed the gateway (toolgate__disable_server …) did not say
// which server it changed: "who disabled memory?" had no answer in the
// log, where `toolgate servers disable` and the console's button name the
// server. The gateway puts a Noter for the record of each call it audits
// in the call's context; the code the call runs says what it acts on
// (Note): the record's server, and its reason unless it has one (a
// refusal's), in the words those records use (`server "memory"`).

// Noter takes what an audited call acts on, for its record: the server
// (Record.Server; "" for none) and what it did, in words.
type Noter interface{ Note(server, what string) }

type noterKey struct{}

// WithNoter returns ctx carrying n, the Noter of the record of the call
// ctx belongs to.
func WithNoter(ctx context.Context, n Noter) context.Context {
	return context.WithValue(ctx, noterKey{}, n)
}

// NoterFrom returns the Noter ctx carries (nil for none).
func NoterFrom(ctx context.Context) Noter {
	n, _ := ctx.Value(noterKey{}).(Noter)
	return n
}

// Note says what the audited call ctx belongs to acts on; nothing when no
// record of it is written.
func Note(ctx context.Context, server, what string) {
	if n := NoterFrom(ctx); n != nil {
		n.Note(server, what)
	}
}
