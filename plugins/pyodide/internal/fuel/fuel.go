// Package fuel adds deterministic CPU metering ("fuel") to a WebAssembly
// module by rewriting its code.
//
// wazero has no fuel of its own. Function listeners only see calls, so a
// call-free loop never stops, and they cost ~28x. Instead, Instrument appends
// one exported mutable i64 global (GlobalName) and inserts, at the entry of
// every function that calls another, and at the top of every `loop` body:
//
//	global.get $fuel; i64.const 1; i64.sub; global.set $fuel
//	global.get $fuel; i64.const 0; i64.lt_s; if; unreachable; end
//
// The host sets the global before calling the module and reads it afterwards:
// the difference is the fuel consumed. A negative value after a trap means
// the module ran out of fuel. Because the counter is an ordinary global, a
// watchdog can also zero it to stop a guest at a wall-clock deadline without
// wazero's WithCloseOnContextDone, which costs CPython ~3x.
//
// # Why a hand-written module walker
//
// Only the global, export and code sections change; every other section is
// copied byte for byte, so nothing Instrument does not understand can be
// lost or re-encoded wrongly. Appending the global after all imported and
// defined globals needs no index renumbering. Inside code bodies a small
// scanner decodes each instruction's immediates to find `loop` opcodes; it
// knows the MVP, sign-extension, saturating truncation, bulk memory,
// reference types, multi-value block types and SIMD encodings. An opcode it
// does not know is an error, never a silent miss.
package fuel

import (
	"bytes"
	"errors"
	"fmt"
)

// GlobalName is the export name of the fuel counter added by Instrument.
const GlobalName = "rlm_fuel"

// Stats describes what Instrument changed.
type Stats struct {
	Functions int // function bodies scanned
	Entries   int // function entries metered (functions that call others)
	Loops     int // loop headers metered
}

const (
	secCustom = 0
	secImport = 2
	secGlobal = 6
	secExport = 7
	secCode   = 10
)

// IsInstrumented reports whether the module already exports GlobalName.
func IsInstrumented(wasm []byte) bool {
	secs, err := splitSections(wasm)
	if err != nil {
		return false
	}
	for _, s := range secs {
		if s.id != secExport {
			continue
		}
		r := &reader{b: s.body}
		n, err := r.u32()
		if err != nil {
			return false
		}
		for i := uint32(0); i < n; i++ {
			name, err := r.name()
			if err != nil {
				return false
			}
			if _, err := r.byte(); err != nil {
				return false
			}
			if _, err := r.u32(); err != nil {
				return false
			}
			if name == GlobalName {
				return true
			}
		}
	}
	return false
}

// Instrument returns a copy of the module with fuel metering added.
func Instrument(wasm []byte) ([]byte, Stats, error) {
	var st Stats
	secs, err := splitSections(wasm)
	if err != nil {
		return nil, st, err
	}
	importedGlobals := uint32(0)
	definedGlobals := uint32(0)
	for _, s := range secs {
		switch s.id {
		case secImport:
			importedGlobals, err = countImportedGlobals(s.body)
			if err != nil {
				return nil, st, fmt.Errorf("import section: %w", err)
			}
		case secGlobal:
			r := &reader{b: s.body}
			if definedGlobals, err = r.u32(); err != nil {
				return nil, st, fmt.Errorf("global section: %w", err)
			}
		case secExport:
			if IsInstrumented(wasm) {
				return nil, st, errors.New("module is already instrumented")
			}
		}
	}
	gidx := importedGlobals + definedGlobals

	// The new global: i64, mutable, initialised to 0.
	newGlobal := []byte{0x7e, 0x01, 0x42, 0x00, 0x0b}
	haveGlobal, haveExport, haveCode := false, false, false
	var out [][]byte
	for _, s := range secs {
		body := s.body
		switch s.id {
		case secGlobal:
			haveGlobal = true
			body = appendVecEntry(s.body, newGlobal)
		case secExport:
			haveExport = true
			body = appendVecEntry(s.body, exportEntry(gidx))
		case secCode:
			haveCode = true
			body, err = instrumentCode(s.body, gidx, &st)
			if err != nil {
				return nil, st, fmt.Errorf("code section: %w", err)
			}
		}
		// Sections that are missing are inserted before the first section
		// that must follow them (custom sections are placed anywhere).
		if s.id != secCustom {
			if !haveGlobal && orderOf(s.id) > orderOf(secGlobal) {
				haveGlobal = true
				out = append(out, section(secGlobal, appendVecEntry([]byte{0}, newGlobal)))
			}
			if !haveExport && orderOf(s.id) > orderOf(secExport) {
				haveExport = true
				out = append(out, section(secExport, appendVecEntry([]byte{0}, exportEntry(gidx))))
			}
		}
		out = append(out, section(s.id, body))
	}
	if !haveGlobal {
		out = append(out, section(secGlobal, appendVecEntry([]byte{0}, newGlobal)))
	}
	if !haveExport {
		out = append(out, section(secExport, appendVecEntry([]byte{0}, exportEntry(gidx))))
	}
	if !haveCode {
		return nil, st, errors.New("module has no code section")
	}
	res := append([]byte{}, wasm[:8]...)
	for _, o := range out {
		res = append(res, o...)
	}
	return res, st, nil
}

// orderOf gives the position a non-custom section must have. The data count
// section (12) sits between import-ish sections and code, and tag (13) after
// memory, so raw ids are not in order.
func orderOf(id byte) int {
	switch id {
	case 1, 2, 3, 4, 5:
		return int(id)
	case 13: // tag
		return 5
	case 6, 7, 8, 9:
		return int(id)
	case 12: // data count
		return 9
	case 10, 11:
		return int(id)
	}
	return 100
}

type rawSection struct {
	id   byte
	body []byte
}

func splitSections(wasm []byte) ([]rawSection, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte{0, 'a', 's', 'm'}) {
		return nil, errors.New("not a WebAssembly binary (bad magic)")
	}
	if !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return nil, errors.New("unsupported WebAssembly binary version")
	}
	r := &reader{b: wasm, p: 8}
	var secs []rawSection
	for r.p < len(r.b) {
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		n, err := r.u32()
		if err != nil {
			return nil, err
		}
		body, err := r.bytes(int(n))
		if err != nil {
			return nil, fmt.Errorf("section %d: %w", id, err)
		}
		secs = append(secs, rawSection{id: id, body: body})
	}
	return secs, nil
}

func countImportedGlobals(b []byte) (uint32, error) {
	r := &reader{b: b}
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	var globals uint32
	for i := uint32(0); i < n; i++ {
		if _, err := r.name(); err != nil {
			return 0, err
		}
		if _, err := r.name(); err != nil {
			return 0, err
		}
		kind, err := r.byte()
		if err != nil {
			return 0, err
		}
		switch kind {
		case 0: // func
			_, err = r.u32()
		case 1: // table: reftype, limits
			if _, err = r.byte(); err == nil {
				err = r.limits()
			}
		case 2: // memory
			err = r.limits()
		case 3: // global: valtype, mut
			globals++
			if _, err = r.byte(); err == nil {
				_, err = r.byte()
			}
		case 4: // tag
			if _, err = r.byte(); err == nil {
				_, err = r.u32()
			}
		default:
			return 0, fmt.Errorf("unknown import kind %#x", kind)
		}
		if err != nil {
			return 0, err
		}
	}
	return globals, nil
}

func exportEntry(gidx uint32) []byte {
	e := appendU32(nil, uint32(len(GlobalName)))
	e = append(e, GlobalName...)
	e = append(e, 3) // global
	return appendU32(e, gidx)
}

// appendVecEntry appends one encoded entry to a vector (count-prefixed) body.
func appendVecEntry(vec []byte, entry []byte) []byte {
	r := &reader{b: vec}
	n, err := r.u32()
	if err != nil {
		n, r.p = 0, len(vec)
	}
	out := appendU32(nil, n+1)
	out = append(out, vec[r.p:]...)
	return append(out, entry...)
}

func section(id byte, body []byte) []byte {
	out := []byte{id}
	out = appendU32(out, uint32(len(body)))
	return append(out, body...)
}

func fuelCheck(gidx uint32) []byte {
	var b []byte
	b = append(b, 0x23) // global.get
	b = appendU32(b, gidx)
	b = append(b, 0x42, 0x01, 0x7d) // i64.const 1; i64.sub
	b = append(b, 0x24)             // global.set
	b = appendU32(b, gidx)
	b = append(b, 0x23)
	b = appendU32(b, gidx)
	b = append(b, 0x42, 0x00, 0x53) // i64.const 0; i64.lt_s
	b = append(b, 0x04, 0x40)       // if (empty)
	b = append(b, 0x00, 0x0b)       // unreachable; end
	return b
}

func instrumentCode(b []byte, gidx uint32, st *Stats) ([]byte, error) {
	check := fuelCheck(gidx)
	r := &reader{b: b}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendU32(make([]byte, 0, len(b)+len(b)/16), n)
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		body, err := r.bytes(int(size))
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		fn, err = instrumentBody(fn[:0], body, check, st)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(fn)))
		out = append(out, fn...)
		st.Functions++
	}
	return out, nil
}

// instrumentBody meters every loop header, and the function entry only when
// the function contains a call. That is enough to bound any execution: an
// endless run needs endless loop iterations (each metered) or endless calls,
// and every function on a call cycle contains a call (so its entry is
// metered). Leaf functions, which are most of the small helpers the
// interpreter calls per bytecode, run unmetered and bounded.
func instrumentBody(dst, body, check []byte, st *Stats) ([]byte, error) {
	r := &reader{b: body}
	nlocals, err := r.u32()
	if err != nil {
		return nil, err
	}
	for i := uint32(0); i < nlocals; i++ {
		if _, err := r.u32(); err != nil {
			return nil, err
		}
		if err := r.valtype(); err != nil {
			return nil, err
		}
	}
	codeStart := r.p
	// First pass: does the function call anything?
	calls := false
	for r.p < len(r.b) {
		op := r.b[r.p]
		r.p++
		if err := r.skipImmediates(op); err != nil {
			return nil, fmt.Errorf("at offset %d (opcode %#x): %w", r.p, op, err)
		}
		if op >= 0x10 && op <= 0x13 {
			calls = true
		}
	}
	dst = append(dst, body[:codeStart]...)
	if calls {
		dst = append(dst, check...)
		st.Entries++
	}
	r.p = codeStart
	last := r.p
	for r.p < len(r.b) {
		op := r.b[r.p]
		r.p++
		if err := r.skipImmediates(op); err != nil {
			return nil, err
		}
		if op == 0x03 { // loop: meter every iteration at the top of its body
			dst = append(dst, body[last:r.p]...)
			dst = append(dst, check...)
			last = r.p
			st.Loops++
		}
	}
	return append(dst, body[last:]...), nil
}
