package credentials

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"
)

// DefaultRecheckInterval is Options.RecheckInterval's default: a credential
// file is looked at again at most once a second, on use.
const DefaultRecheckInterval = time.Second

// File size limits, in bytes.
const (
	// maxSecretBytes bounds a secret file (64 KiB), as config does.
	maxSecretBytes = 64 << 10
	// maxPEMBytes bounds a certificate, key or CA bundle file (1 MiB; the
	// whole Mozilla root bundle is about 220 KiB).
	maxPEMBytes = 1 << 20
)

// watched is a value parsed from one or more files which are read again,
// on use, at most once per interval — polling, so no inotify watch is
// needed, and a Kubernetes Secret volume (whose files are swapped through a
// symlink) is followed like any other file.
//
// What a re-read finds is compared with what the previous one found (a
// SHA-256 digest of the files' contents, or of the read error): when
// nothing changed, nothing happens. When it changed and parses, the new
// value replaces the old one and the generation goes up. When it changed
// but does not parse or cannot be read, the old value is kept and one
// error is logged for that change (not on every use); before any value was
// ever loaded, get returns the error instead.
type watched[T any] struct {
	key      string // configuration key, for logs and errors
	paths    []string
	maxBytes int64
	parse    func(data [][]byte) (T, error)
	now      func() time.Time
	interval time.Duration
	logger   *slog.Logger

	mu        sync.Mutex
	observed  bool
	checkedAt time.Time
	seen      [sha256.Size]byte // digest of the last observation
	val       T
	gen       uint64 // 0 until loaded; +1 on every successful load
	err       error  // why nothing was loaded yet (gen == 0)
}

// get returns the current value and its generation (a number that changes
// whenever the value does), re-reading the files first when the interval
// has passed since they were last read (or the clock went back). The error
// is set only while no value was ever loaded; it names the key and the
// paths, never the contents.
func (w *watched[T]) get() (T, uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if w.observed && !now.Before(w.checkedAt) && now.Sub(w.checkedAt) < w.interval {
		return w.val, w.gen, w.err
	}
	first := !w.observed
	w.observed, w.checkedAt = true, now
	data, digest, readErr := w.read()
	if !first && digest == w.seen {
		return w.val, w.gen, w.err
	}
	w.seen = digest
	err := readErr
	var v T
	if err == nil {
		v, err = w.parse(data)
	}
	switch {
	case err != nil && w.gen > 0:
		w.logger.Error("credential file unusable; keeping the previous value",
			slog.String("key", w.key), slog.Any("error", err))
	case err != nil:
		w.err = fmt.Errorf("%s: %w", w.key, err)
		w.logger.Error("credential file unusable", slog.String("key", w.key), slog.Any("error", err))
	default:
		if w.gen > 0 {
			w.logger.Info("credential file changed; using the new value", slog.String("key", w.key),
				slog.Uint64("generation", w.gen+1))
		}
		w.val, w.err = v, nil
		w.gen++
	}
	return w.val, w.gen, w.err
}

// read reads every path (each at most maxBytes) and returns the contents
// and the digest of this observation: of the contents, or of the first
// read error.
func (w *watched[T]) read() ([][]byte, [sha256.Size]byte, error) {
	h := sha256.New()
	data := make([][]byte, len(w.paths))
	for i, p := range w.paths {
		b, err := readLimited(p, w.maxBytes)
		if err != nil {
			h.Write([]byte("error\x00" + err.Error()))
			return nil, [sha256.Size]byte(h.Sum(nil)), err
		}
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
		data[i] = b
	}
	return data, [sha256.Size]byte(h.Sum(nil)), nil
}

// readLimited reads the file at path, refusing one larger than max bytes.
// Errors name the path, never the content.
func readLimited(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %s bytes", path, strconv.FormatInt(max, 10))
	}
	return b, nil
}

// parseSecret is the parse function of a secret file: one trailing "\n" or
// "\r\n" removed (as config.SecretRef.Resolve does), then it must be
// non-empty and free of control characters (a value sent in a header or a
// form cannot hold them, RFC 9110 §5.5).
func parseSecret(path string) func([][]byte) (string, error) {
	return func(data [][]byte) (string, error) {
		b := data[0]
		if t, ok := bytes.CutSuffix(b, []byte("\r\n")); ok {
			b = t
		} else {
			b = bytes.TrimSuffix(b, []byte("\n"))
		}
		if len(b) == 0 {
			return "", fmt.Errorf("secret file %s is empty", path)
		}
		if bytes.ContainsFunc(b, isControl) {
			return "", fmt.Errorf("secret file %s contains a control character", path)
		}
		return string(b), nil
	}
}

func isControl(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }
