package fuel

import (
	"errors"
	"fmt"
)

var errEOF = errors.New("unexpected end of module")

type reader struct {
	b []byte
	p int
}

func (r *reader) byte() (byte, error) {
	if r.p >= len(r.b) {
		return 0, errEOF
	}
	c := r.b[r.p]
	r.p++
	return c, nil
}

func (r *reader) bytes(n int) ([]byte, error) {
	if n < 0 || r.p+n > len(r.b) {
		return nil, errEOF
	}
	s := r.b[r.p : r.p+n]
	r.p += n
	return s, nil
}

func (r *reader) skip(n int) error {
	_, err := r.bytes(n)
	return err
}

// u32 reads an unsigned LEB128 of at most 5 bytes.
func (r *reader) u32() (uint32, error) {
	var v uint32
	for i := 0; i < 5; i++ {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("u32 LEB128 too long")
}

// sleb skips a signed LEB128 of at most max bytes.
func (r *reader) sleb(max int) error {
	for i := 0; i < max; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return errors.New("signed LEB128 too long")
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(int(n))
	return string(b), err
}

func (r *reader) limits() error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if _, err := r.u32(); err != nil {
		return err
	}
	if flags&1 != 0 {
		_, err = r.u32()
	}
	return err
}

func (r *reader) valtype() error {
	c, err := r.byte()
	if err != nil {
		return err
	}
	switch c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return nil
	}
	return fmt.Errorf("unsupported value type %#x", c)
}

func (r *reader) memarg() error {
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 { // multi-memory: explicit memory index
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	_, err = r.u32()
	return err
}

func (r *reader) u32s(n int) error {
	for i := 0; i < n; i++ {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}

// skipImmediates advances past the immediates of the instruction whose
// opcode byte was just read.
func (r *reader) skipImmediates(op byte) error {
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0b, op == 0x0f,
		op == 0x1a, op == 0x1b, op == 0xd1,
		op >= 0x45 && op <= 0xc4:
		return nil
	case op >= 0x02 && op <= 0x04: // block, loop, if: blocktype (s33)
		return r.sleb(5)
	case op == 0x0c, op == 0x0d: // br, br_if
		return r.u32s(1)
	case op == 0x0e: // br_table
		n, err := r.u32()
		if err != nil {
			return err
		}
		return r.u32s(int(n) + 1)
	case op == 0x10, op == 0x12: // call, return_call
		return r.u32s(1)
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
		return r.u32s(2)
	case op == 0x1c: // select t*
		n, err := r.u32()
		if err != nil {
			return err
		}
		for i := uint32(0); i < n; i++ {
			if err := r.valtype(); err != nil {
				return err
			}
		}
		return nil
	case op >= 0x20 && op <= 0x26: // locals, globals, table.get/set
		return r.u32s(1)
	case op >= 0x28 && op <= 0x3e: // loads and stores
		return r.memarg()
	case op == 0x3f, op == 0x40: // memory.size, memory.grow
		return r.u32s(1)
	case op == 0x41:
		return r.sleb(5)
	case op == 0x42:
		return r.sleb(10)
	case op == 0x43:
		return r.skip(4)
	case op == 0x44:
		return r.skip(8)
	case op == 0xd0: // ref.null heaptype
		return r.sleb(5)
	case op == 0xd2: // ref.func
		return r.u32s(1)
	case op == 0xfc:
		sub, err := r.u32()
		if err != nil {
			return err
		}
		switch {
		case sub <= 7:
			return nil
		case sub == 8, sub == 10, sub == 12, sub == 14:
			return r.u32s(2)
		case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
			return r.u32s(1)
		}
		return fmt.Errorf("unknown 0xfc sub-opcode %d", sub)
	case op == 0xfd:
		return r.simd()
	case op == 0xfe: // threads
		sub, err := r.u32()
		if err != nil {
			return err
		}
		if sub == 0x03 { // atomic.fence
			return r.skip(1)
		}
		return r.memarg()
	}
	return fmt.Errorf("unknown opcode %#x", op)
}

func (r *reader) simd() error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads/stores
		return r.memarg()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		return r.skip(16)
	case sub >= 21 && sub <= 34: // extract/replace lane
		return r.skip(1)
	case sub >= 84 && sub <= 91: // load/store lane
		if err := r.memarg(); err != nil {
			return err
		}
		return r.skip(1)
	case sub <= 0x113:
		return nil
	}
	return fmt.Errorf("unknown SIMD sub-opcode %d", sub)
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
