package build

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// What an archive's names may hold, and how its stream must end: checks
// shared by the unpacker, the upload endpoint (which refuses a bad archive
// with 400 before it is stored) and the CLI's packer (which names the file
// before it packs it).

// CheckHeader refuses an entry whose name, or link target, a build log, a
// terminal or another tool could show or read otherwise than it is (see
// CheckName).
func CheckHeader(hdr *tar.Header) error {
	if err := CheckName("entry name", hdr.Name); err != nil {
		return err
	}
	if hdr.Typeflag == tar.TypeSymlink || hdr.Typeflag == tar.TypeLink {
		if err := CheckName("link target of "+strconv.Quote(hdr.Name)+",", hdr.Linkname); err != nil {
			return err
		}
	}
	return nil
}

// CheckName refuses a name with invalid UTF-8, a control character (C0,
// DEL, C1: escape sequences rewrite a terminal, a newline forges a log
// line) or a bidirectional formatting character (which makes a name read
// in another order than it is). The error describes the character and
// quotes the name escaped, never its raw bytes. what says which name it is.
func CheckName(what, name string) error {
	for i, r := range name {
		var why string
		switch {
		case r == utf8.RuneError && !validAt(name, i):
			why = fmt.Sprintf("invalid UTF-8 (byte 0x%02x at offset %d)", name[i], i)
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
			why = fmt.Sprintf("a control character (U+%04X at offset %d)", r, i)
		case bidiControl(r):
			why = fmt.Sprintf("a bidirectional formatting character (U+%04X at offset %d)", r, i)
		default:
			continue
		}
		return &NameError{What: what, Name: name, Why: why}
	}
	return nil
}

// NameError is CheckName's refusal; it is an ErrUnsafe.
type NameError struct {
	What, Name string
	Why        string // the character and where it is, e.g. "a control character (U+001B at offset 3)"
}

func (e *NameError) Error() string {
	return fmt.Sprintf("%v: %s %s has %s", ErrUnsafe, e.What, QuoteName(e.Name), e.Why)
}

func (e *NameError) Unwrap() error { return ErrUnsafe }

// validAt reports whether the U+FFFD decoded at i was written as such,
// rather than being how the decoder reports a bad byte.
func validAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 3
}

// bidiControl reports the bidirectional formatting characters: the marks,
// embeddings, overrides and isolates.
func bidiControl(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// QuoteName renders a name for an error message: Go-quoted, so that every
// control or invalid byte is escaped, and cut to 120 bytes.
func QuoteName(name string) string {
	const max = 120
	if len(name) <= max {
		return strconv.Quote(name)
	}
	return strconv.Quote(name[:max]) + "…"
}

// maxPadding bounds the zeros accepted after a tar's end-of-archive
// marker: tar writers pad the archive to their record size (10 KiB by
// default, larger blocking factors rarely reach 1 MiB).
const maxPadding = 1 << 20

// FinishArchive reads what is left of a gzip'd tar once archive/tar has
// read its end-of-archive marker: archive/tar stops there, so without this
// the rest of the gzip stream, its trailer (CRC-32 and length) included,
// is never read and a truncated or corrupted archive passes. What follows
// the marker must be zeros (the writer's padding), and the gzip stream
// must then end with a trailer that matches; anything else after the tar
// (a second archive, a second gzip member with data, garbage) is refused,
// so no tool can read an archive other than the one unpacked.
func FinishArchive(zr io.Reader) error {
	buf := make([]byte, 32<<10)
	var n int
	for {
		k, err := zr.Read(buf)
		for _, b := range buf[:k] {
			if b != 0 {
				return fmt.Errorf("%w: data follows the end of the tar archive", ErrUnsafe)
			}
		}
		if n += k; n > maxPadding {
			return fmt.Errorf("%w: more than %d bytes follow the end of the tar archive", ErrUnsafe, maxPadding)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return streamError(err)
		}
	}
}

// streamError says what a read error of the gzip'd tar stream means.
func streamError(err error) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the archive is truncated (the gzip stream ends before its trailer)", ErrUnsafe)
	case errors.Is(err, gzip.ErrChecksum):
		return fmt.Errorf("%w: the archive is corrupt (its gzip checksum or length does not match)", ErrUnsafe)
	case errors.Is(err, gzip.ErrHeader):
		return fmt.Errorf("%w: data follows the end of the gzip stream", ErrUnsafe)
	}
	return fmt.Errorf("%w: corrupt gzip stream: %v", ErrUnsafe, err)
}
