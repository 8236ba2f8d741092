package models

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress reports downloads: a redrawn bar on a terminal, a few plain lines
// otherwise (one at start, one per 25%, one at the end).
type progress struct {
	w   io.Writer
	tty bool

	mu sync.Mutex
}

func newProgress(w io.Writer) *progress {
	if w == nil {
		return &progress{w: io.Discard}
	}
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *progress) linef(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// reader wraps r so reads advance the display for label. It also stops early
// when ctx is done (the copy then fails with the context's error).
func (p *progress) reader(ctx context.Context, r io.Reader, label string, total int64) io.Reader {
	pr := &progressReader{ctx: ctx, r: r, p: p, label: label, total: total, start: time.Now()}
	if !p.tty {
		p.linef("%s: downloading%s", label, sizeSuffix(total))
	}
	return pr
}

func (p *progress) done(label string) {
	if p.tty {
		p.mu.Lock()
		fmt.Fprint(p.w, "\r\033[K")
		p.mu.Unlock()
	}
}

type progressReader struct {
	ctx      context.Context
	r        io.Reader
	p        *progress
	label    string
	total    int64
	n        int64
	start    time.Time
	lastDraw time.Time
	lastPct  int
}

func (r *progressReader) Read(b []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, context.Cause(r.ctx)
	}
	n, err := r.r.Read(b)
	r.n += int64(n)
	r.draw(err != nil)
	return n, err
}

func (r *progressReader) draw(final bool) {
	now := time.Now()
	if r.p.tty {
		if !final && now.Sub(r.lastDraw) < 100*time.Millisecond {
			return
		}
		r.lastDraw = now
		rate := float64(r.n) / max(now.Sub(r.start).Seconds(), 1e-3)
		line := fmt.Sprintf("%s %s  %s/s", r.label, HumanBytes(r.n), HumanBytes(int64(rate)))
		if r.total > 0 {
			frac := min(float64(r.n)/float64(r.total), 1)
			const width = 30
			fill := int(frac * width)
			line = fmt.Sprintf("%-24s [%s%s] %5.1f%% %s/%s %s/s", r.label,
				strings.Repeat("=", fill), strings.Repeat(" ", width-fill), frac*100,
				HumanBytes(r.n), HumanBytes(r.total), HumanBytes(int64(rate)))
		}
		r.p.mu.Lock()
		fmt.Fprint(r.p.w, "\r\033[K"+line)
		r.p.mu.Unlock()
		return
	}
	if r.total > 0 {
		pct := int(r.n * 100 / r.total)
		if pct/25 > r.lastPct/25 && pct < 100 {
			r.lastPct = pct
			r.p.linef("%s: %d%% (%s of %s)", r.label, pct, HumanBytes(r.n), HumanBytes(r.total))
		}
	}
}

func sizeSuffix(n int64) string {
	if n <= 0 {
		return ""
	}
	return " (" + HumanBytes(n) + ")"
}

// HumanBytes renders a size in binary units ("1.5 MiB").
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
