package bolt

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
)

// walkFile checks the structure of the bbolt file at path with plain reads:
// meta pages, size against the high-water mark, the free list, and every
// B+tree page. Every page reference is bounds-checked and may be reached
// only once, and trees may be at most maxDepth deep, so a damaged file
// yields an error where bbolt, which trusts its mmap, could fault, loop or
// recurse without end.
//
// With full unset (Open), it costs what the trees' branch pages weigh —
// about one page in a hundred — not the file's size: the leaf pages of the
// buckets below the root (except meta) are not read. Their references are
// bounds-checked and may appear once; each leaf is checked when it is read
// (bbolt verifies every page's id and type before using it, records carry
// a checksum, and a fault is damage, see Journal.view), and Check reads
// them all. What Open cannot see without reading the leaves is a leaf
// rewritten into a branch that points back up its own tree; only a file
// written on purpose holds one, and Check finds it.
//
// Page layout (bbolt's own, native byte order): a 16-byte header (id u64,
// flags u16, count u16, overflow u32), then count 16-byte elements whose
// keys and values sit at offsets relative to the element.
func walkFile(path string, pageSize int, full bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	w := &fileWalker{f: f, size: st.Size(), pageSize: int64(pageSize), full: full}
	return w.walk()
}

const (
	pageHeaderSize = 16
	elemSize       = 16
	flagBranch     = 0x01
	flagLeaf       = 0x02
	flagFreelist   = 0x10
	boltMagic      = 0xED0CDAED
	maxDepth       = 64
)

var ne = binary.NativeEndian

type fileWalker struct {
	f        *os.File
	size     int64
	pageSize int64
	hwm      uint64   // pages below this id are in use or free
	used     []uint64 // a bit per page: referenced already
	full     bool
	// bufs holds a page buffer per depth of the walk, reused: a walk of a
	// large journal reads thousands of pages, and in a new process each
	// fresh buffer costs page faults as well as an allocation.
	bufs [maxDepth + 2][]byte
}

type metaPage struct {
	pageSize         uint32
	root, free, hwm  uint64
	txid             uint64
	magicOK, checkOK bool
}

func (w *fileWalker) meta(i int64) metaPage {
	var b [pageHeaderSize + 64]byte
	if _, err := w.f.ReadAt(b[:], i*w.pageSize); err != nil {
		return metaPage{}
	}
	m := b[pageHeaderSize:]
	h := fnv.New64a()
	h.Write(m[:56])
	return metaPage{
		pageSize: ne.Uint32(m[8:]),
		root:     ne.Uint64(m[16:]), free: ne.Uint64(m[32:]), hwm: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:]),
		magicOK: ne.Uint32(m[0:]) == boltMagic && ne.Uint32(m[4:]) == 2,
		checkOK: ne.Uint64(m[56:]) == h.Sum64(),
	}
}

func (w *fileWalker) walk() error {
	// bbolt uses the valid meta page with the higher transaction id.
	m0, m1 := w.meta(0), w.meta(1)
	if m1.txid > m0.txid {
		m0, m1 = m1, m0
	}
	m := m0
	if !m.magicOK || !m.checkOK {
		m = m1
	}
	switch {
	case !m.magicOK || !m.checkOK:
		return fmt.Errorf("no valid meta page")
	case int64(m.pageSize) != w.pageSize:
		return fmt.Errorf("meta page size %d, file opened with %d", m.pageSize, w.pageSize)
	case m.hwm < 3 || m.hwm > uint64(w.size/w.pageSize):
		return fmt.Errorf("truncated: %d pages in use, %d bytes in the file", m.hwm, w.size)
	}
	w.hwm = m.hwm
	w.used = make([]uint64, w.hwm/64+1)
	if err := w.freelist(m.free); err != nil {
		return err
	}
	return w.tree(m.root, 0, -1, func(name []byte) bool { return w.full || string(name) == string(bucketMeta) })
}

// use marks pages id..id+overflow as referenced; a page referenced twice is
// damage (a loop, or two trees sharing a page).
func (w *fileWalker) use(id, overflow uint64) error {
	for i := id; i <= id+overflow; i++ {
		if w.used[i/64]&(1<<(i%64)) != 0 {
			return fmt.Errorf("page %d: referenced twice", i)
		}
		w.used[i/64] |= 1 << (i % 64)
	}
	return nil
}

// height is the depth of the leaves of the tree rooted at id, found down
// its first branch, reading page headers only (bbolt keeps every leaf of
// a tree at the same depth).
func (w *fileWalker) height(id uint64) (int, error) {
	hdr := make([]byte, pageHeaderSize+elemSize)
	for depth := 0; depth <= maxDepth; depth++ {
		if id < 2 || id >= w.hwm {
			return 0, fmt.Errorf("page %d: out of range [2, %d)", id, w.hwm)
		}
		if _, err := w.f.ReadAt(hdr, int64(id)*w.pageSize); err != nil {
			return 0, fmt.Errorf("page %d: %v", id, err)
		}
		switch flag := ne.Uint16(hdr[8:]); {
		case ne.Uint64(hdr) != id:
			return 0, fmt.Errorf("page %d: header says page %d", id, ne.Uint64(hdr))
		case flag == flagLeaf:
			return depth, nil
		case flag != flagBranch || ne.Uint16(hdr[10:]) == 0:
			return 0, fmt.Errorf("page %d: unexpected type %#x", id, flag)
		}
		id = ne.Uint64(hdr[pageHeaderSize+8:]) // the first child
	}
	return 0, fmt.Errorf("page %d: tree deeper than %d", id, maxDepth)
}

// page reads page id and its overflow pages, at depth depth of the walk:
// the buffer it returns is that depth's, valid until the walk reads
// another page at the same depth. A page of one page size, the usual, is
// one read.
func (w *fileWalker) page(id uint64, depth int, flags ...uint16) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page %d: out of range [2, %d)", id, w.hwm)
	}
	p := w.buf(depth, w.pageSize)
	if _, err := w.f.ReadAt(p, int64(id)*w.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %v", id, err)
	}
	got, flag, overflow := ne.Uint64(p), ne.Uint16(p[8:]), uint64(ne.Uint32(p[12:]))
	switch {
	case got != id:
		return nil, fmt.Errorf("page %d: header says page %d", id, got)
	case !oneOf(flag, flags):
		return nil, fmt.Errorf("page %d: unexpected type %#x", id, flag)
	case id+overflow >= w.hwm:
		return nil, fmt.Errorf("page %d: %d overflow pages run past the end", id, overflow)
	}
	if err := w.use(id, overflow); err != nil {
		return nil, err
	}
	if overflow == 0 {
		return p, nil
	}
	p = w.buf(depth, int64(overflow+1)*w.pageSize)
	if _, err := w.f.ReadAt(p[w.pageSize:], int64(id+1)*w.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %v", id, err)
	}
	return p, nil
}

// buf is depth's buffer, n bytes long, keeping what it held.
func (w *fileWalker) buf(depth int, n int64) []byte {
	b := w.bufs[depth]
	if int64(cap(b)) < n {
		b = append(b[:cap(b)], make([]byte, n-int64(cap(b)))...)
	}
	w.bufs[depth] = b[:n]
	return b[:n]
}

func oneOf(f uint16, set []uint16) bool {
	for _, s := range set {
		if f == s {
			return true
		}
	}
	return false
}

func (w *fileWalker) freelist(id uint64) error {
	if id == 1<<64-1 {
		return fmt.Errorf("free list not stored in the file")
	}
	p, err := w.page(id, 0, flagFreelist)
	if err != nil {
		return fmt.Errorf("free list: %w", err)
	}
	start, n := uint64(pageHeaderSize), uint64(ne.Uint16(p[10:]))
	if n == 0xffff {
		n, start = ne.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if n > w.hwm || start+n*8 > uint64(len(p)) {
		return fmt.Errorf("free list: %d entries do not fit", n)
	}
	for i := range n {
		if f := ne.Uint64(p[start+i*8:]); f < 2 || f >= w.hwm {
			return fmt.Errorf("free list: page %d out of range", f)
		}
	}
	return nil
}

// tree walks the B+tree rooted at page id, at depth depth below the file's
// root. leaves, when not negative, is the depth of the tree's leaves: they
// are marked, not read. descend says which buckets found in leaves to
// read in full.
func (w *fileWalker) tree(id uint64, depth, leaves int, descend func([]byte) bool) error {
	if depth > maxDepth {
		return fmt.Errorf("page %d: tree deeper than %d", id, maxDepth)
	}
	if depth == leaves {
		if id < 2 || id >= w.hwm {
			return fmt.Errorf("page %d: out of range [2, %d)", id, w.hwm)
		}
		return w.use(id, 0)
	}
	p, err := w.page(id, depth, flagBranch, flagLeaf)
	if err != nil {
		return err
	}
	if leaves >= 0 && ne.Uint16(p[8:]) == flagLeaf {
		return fmt.Errorf("page %d: a leaf above the tree's leaves", id)
	}
	return w.node(p, id, depth, leaves, descend)
}

// node checks the elements of one branch or leaf page (or inline bucket).
func (w *fileWalker) node(p []byte, id uint64, depth, leaves int, descend func([]byte) bool) error {
	branch, n := ne.Uint16(p[8:]) == flagBranch, uint64(ne.Uint16(p[10:]))
	if pageHeaderSize+n*elemSize > uint64(len(p)) {
		return fmt.Errorf("page %d: %d elements do not fit", id, n)
	}
	for i := range n {
		e := p[pageHeaderSize+i*elemSize:]
		at := pageHeaderSize + i*elemSize
		if branch {
			pos, ksize, child := uint64(ne.Uint32(e)), uint64(ne.Uint32(e[4:])), ne.Uint64(e[8:])
			if at+pos+ksize > uint64(len(p)) {
				return fmt.Errorf("page %d: branch element %d out of bounds", id, i)
			}
			if err := w.tree(child, depth+1, leaves, descend); err != nil {
				return err
			}
			continue
		}
		flags, pos, ksize, vsize := ne.Uint32(e), uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
		if at+pos+ksize+vsize > uint64(len(p)) {
			return fmt.Errorf("page %d: leaf element %d out of bounds", id, i)
		}
		if flags&1 == 0 {
			continue
		}
		key, v := p[at+pos:at+pos+ksize], p[at+pos+ksize:at+pos+ksize+vsize]
		if err := w.bucket(key, v, depth, descend); err != nil {
			return fmt.Errorf("bucket %q: %w", key, err)
		}
	}
	return nil
}

// bucket checks a bucket value: a 16-byte header (root page, sequence),
// then, for an inline bucket (root 0), a leaf page holding its keys.
func (w *fileWalker) bucket(key, v []byte, depth int, descend func([]byte) bool) error {
	if len(v) < pageHeaderSize {
		return fmt.Errorf("bucket header of %d bytes", len(v))
	}
	all := func([]byte) bool { return true }
	if root := ne.Uint64(v); root != 0 {
		leaves := -1
		if !descend(key) {
			h, err := w.height(root)
			if err != nil {
				return err
			}
			leaves = depth + 1 + h
		}
		return w.tree(root, depth+1, leaves, all)
	}
	inline := v[pageHeaderSize:]
	if len(inline) < pageHeaderSize || ne.Uint16(inline[8:]) != flagLeaf {
		return fmt.Errorf("inline bucket is not a leaf page")
	}
	return w.node(inline, 0, depth+1, -1, all)
}
