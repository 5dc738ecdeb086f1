#!/usr/bin/env bash
# build.sh builds python.wasm (CPython 3.11 for wasm32-wasi, with zlib, bz2,
# lzma and sqlite3) and python311.zip (the standard library as sources plus
# unchecked-hash pycs, and IANA time-zone data as the tzdata package) from
# Debian's own sources with Debian's clang-19, lld-19 and wasi-libc. The one
# thing not from the Debian archive is SQLite's amalgamation, taken from the
# npm registry (below), pinned by version and sha256.
#
# Output is cached in ${RLM_WASM_CACHE:-$HOME/.cache/rlm/wasm}/<sha256 of this
# script>/ ; when that directory is complete the script only copies the two
# files into plugins/pyodide/wasm/assets/ and exits. Editing this script
# changes the key, so a changed recipe always rebuilds.
#
# Fuel instrumentation is NOT done here: the Go runner instruments the module at
# load time and caches the result (see plugins/pyodide/internal/fuel). That way a
# binary given with a custom path is metered too, and a change to the
# instrumenter never serves a stale cached module.
#
# Traps this script avoids (see shared/notes/wasm-python.md):
#   - binaryen must not be installed: clang would run Debian's old wasm-opt
#     on the link output and break it. We refuse to build when wasm-opt is found.
#   - clang gets a private sysroot, else configure sees glibc's /usr/include.
#   - wazero rejects absolute-time sleeps: clock_nanosleep is disabled in the
#     config.site so time.sleep uses relative nanosleep.
#   - clang >= 16 turns two old warnings into errors in timemodule.c.
#   - wasi-libc's utimensat/futimens leave the timestamps of a NULL `times`
#     uninitialised, so os.utime(path) and Path.touch() set 1970: posixmodule
#     is patched to pass the current time explicitly.
#   - liblzma's single-threaded mythread.h wants sigprocmask, which WASI lacks
#     (and nothing calls with threads disabled): the block is compiled out.
#
# Cheaper than building a native CPython first: the build python is Debian's
# own python3.11 (same 3.11 bytecode and marshal format), installed from apt
# in seconds instead of compiled in ~2 minutes.
#
# sqlite3: bookworm's SQLite 3.40 predates SQLite's WASI support (3.41), and
# Debian's source has no amalgamation (generating one needs tcl and native
# builds of lemon and mkkeywordhash). The better-sqlite3 npm package ships the
# amalgamation (deps/sqlite3/sqlite3.c, public domain) of a current SQLite;
# its tarball is pinned by version and sha256, downloaded once into
# $CACHE_ROOT/dl/, and compiled once into $CACHE_ROOT/sqlite/<key>/ (key: the
# tarball's sha256, the flags, clang's and wasi-libc's versions), so a change
# elsewhere in this recipe rebuilds CPython but not SQLite. Under __wasi__
# SQLite drops mmap, fchown and load_extension and builds single-threaded.
# Its VFS is "unix-none" (no locking: WASI has no fcntl locks), not the
# WASI default "unix-dotfile": a run killed by its timeout or fuel limit
# mid-transaction would leave the <db>.lock directory in the workspace and
# every later open would fail with "database is locked"; without locks the
# next open rolls the hot journal back, as after a crash. The price: two runs
# writing one database file at the same moment are not serialised.
# Temporary tables and indices live in memory (SQLITE_TEMP_STORE=2): the guest
# has no /tmp. The optional features are those of python.org's macOS build
# (FTS4, FTS5, R*Tree) plus the SQL math functions.
#
# Reproducible: configure is run by relative path and -ffile-prefix-map hides
# the scratch directory from __FILE__ strings; clang honours
# SOURCE_DATE_EPOCH for __DATE__/__TIME__; pycs use unchecked hashes (no
# mtimes) and the zip has fixed timestamps and order. Two builds in different
# directories give identical SHA256SUMS.
#
# Environment:
#   RLM_WASM_CACHE   cache root (default $HOME/.cache/rlm/wasm)
#   RLM_WASM_WORK    scratch directory (default: a fresh mktemp dir, removed on success)
#   RLM_WASM_NO_APT  set to 1 to never call apt-get (fail if a tool is missing)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ASSETS="$HERE/assets"
KEY=$(sha256sum "$HERE/build.sh" | cut -d' ' -f1)
CACHE_ROOT=${RLM_WASM_CACHE:-$HOME/.cache/rlm/wasm}
CACHE="$CACHE_ROOT/$KEY"
JOBS=$(nproc 2>/dev/null || echo 2)

log() { printf 'build.sh: [%ds] %s\n' "$SECONDS" "$*" >&2; }
die() { printf 'build.sh: error: %s\n' "$*" >&2; exit 1; }

install_assets() {
	mkdir -p "$ASSETS"
	cp -f "$CACHE/python.wasm" "$ASSETS/python.wasm"
	cp -f "$CACHE/python311.zip" "$ASSETS/python311.zip"
	log "assets ready in $ASSETS (from $CACHE)"
	ls -l "$ASSETS/python.wasm" "$ASSETS/python311.zip" >&2
}

if [[ -f "$CACHE/python.wasm" && -f "$CACHE/python311.zip" && -f "$CACHE/.complete" ]]; then
	install_assets
	exit 0
fi

# ---------------------------------------------------------------- packages
PKGS=(wasi-libc clang-19 lld-19 llvm-19 libclang-rt-19-dev-wasm32 dpkg-dev
	build-essential python3.11 pkg-config xz-utils curl ca-certificates)
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
SUDO=
[[ $(id -u) -eq 0 ]] || SUDO=sudo
if ((${#missing[@]})); then
	[[ ${RLM_WASM_NO_APT:-} == 1 ]] && die "missing packages: ${missing[*]} (apt-get install ${missing[*]})"
	log "installing: ${missing[*]}"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if command -v wasm-opt >/dev/null 2>&1; then
	die "wasm-opt ($(command -v wasm-opt), from binaryen) is installed; clang would run it on the link output and break python.wasm. Remove binaryen (apt-get remove binaryen) and re-run."
fi

# deb-src sources mirroring the binary ones, so apt-get source works: from
# /etc/apt/sources.list.d/debian.sources (deb822, Debian's container images)
# or from the classic /etc/apt/sources.list (what the Debian 12 installer and
# debootstrap write).
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -rqs '^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	[[ ${RLM_WASM_NO_APT:-} == 1 ]] && die "no deb-src source configured"
	if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
		SRCLIST=/etc/apt/sources.list.d/rlm-deb-src.sources
		log "adding $SRCLIST"
		sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $SUDO tee "$SRCLIST" >/dev/null
	elif grep -qs '^deb ' /etc/apt/sources.list; then
		SRCLIST=/etc/apt/sources.list.d/rlm-deb-src.list
		log "adding $SRCLIST"
		sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $SUDO tee "$SRCLIST" >/dev/null
	else
		die "no Debian apt source (/etc/apt/sources.list.d/debian.sources or deb lines in /etc/apt/sources.list) to mirror as deb-src"
	fi
	$SUDO apt-get update -qq
fi

# ---------------------------------------------------------------- sources
if [[ -n ${RLM_WASM_WORK:-} ]]; then
	W=$RLM_WASM_WORK
	mkdir -p "$W"
else
	W=$(mktemp -d /tmp/rlm-wasm-build.XXXXXX)
fi
W=$(cd "$W" && pwd)
log "work dir $W, cache $CACHE"
mkdir -p "$W/dl"
fetch_orig() { # $1 source package, $2 glob of the orig tarball
	local f
	f=$(ls "$W"/dl/$2 2>/dev/null | head -n1 || true)
	if [[ -z $f ]]; then
		# The Debian diff may 404 on the security mirror; the pristine
		# upstream tarball is all we need, so a failing download is only
		# fatal when it did not arrive.
		(cd "$W/dl" && apt-get source --download-only "$1" >&2) || true
		f=$(ls "$W"/dl/$2 2>/dev/null | head -n1 || true)
	fi
	[[ -n $f ]] || die "could not download the $1 source ($2) with apt-get source"
	printf '%s\n' "$f"
}
PYTAR=$(fetch_orig python3.11 'python3.11_*.orig.tar.*')
ZTAR=$(fetch_orig zlib 'zlib_*.orig.tar.*')
BZTAR=$(fetch_orig bzip2 'bzip2_*.orig.tar.*')
XZTAR=$(fetch_orig xz-utils 'xz-utils_*.orig.tar.*')
# Debian's patches for xz-utils carry liblzma security fixes (bookworm-security);
# they come with the same apt-get source.
XZDEB=$(ls "$W"/dl/xz-utils_*.debian.tar.* 2>/dev/null | head -n1 || true)
TZDEB=$(ls "$W"/dl/tzdata_*_all.deb 2>/dev/null | head -n1 || true)
if [[ -z $TZDEB ]]; then
	# tzdata's data is architecture-independent: the binary package is the
	# compiled zone files, which is what Python's tzdata package ships too.
	(cd "$W/dl" && apt-get download tzdata >&2) || true
	TZDEB=$(ls "$W"/dl/tzdata_*_all.deb 2>/dev/null | head -n1 || true)
fi
[[ -n $TZDEB ]] || die "could not download tzdata with apt-get download"
log "python source: $PYTAR"
log "zlib source:   $ZTAR"
log "bzip2 source:  $BZTAR"
log "xz source:     $XZTAR + ${XZDEB:-no Debian patches}"
log "tzdata:        $TZDEB"

rm -rf "$W/src" "$W/zlib" "$W/bzip2" "$W/xz" "$W/tz" && mkdir -p "$W/src" "$W/zlib" "$W/bzip2" "$W/xz" "$W/tz"
tar -xf "$PYTAR" -C "$W/src" --strip-components=1
tar -xf "$ZTAR" -C "$W/zlib" --strip-components=1
tar -xf "$BZTAR" -C "$W/bzip2" --strip-components=1
tar -xf "$XZTAR" -C "$W/xz" --strip-components=1
if [[ -n $XZDEB ]]; then
	tar -xf "$XZDEB" -C "$W/xz"
	while read -r p; do
		[[ -z $p || $p == \#* ]] && continue
		patch -d "$W/xz" -p1 -s --no-backup-if-mismatch <"$W/xz/debian/patches/$p" || die "xz-utils: Debian patch $p does not apply"
	done <"$W/xz/debian/patches/series"
else
	log "warning: no xz-utils Debian patches downloaded; liblzma is upstream $(basename "$XZTAR") without bookworm's security fixes"
fi
dpkg-deb -x "$TZDEB" "$W/tz"
SRC=$W/src

# os.utime(path) / Path.touch(): pass "now" as an explicit time, not NULL.
grep -q '^        time = NULL; \\$' "$SRC/Modules/posixmodule.c" || die "posixmodule.c: UTIME_TO_TIMESPEC not as expected"
sed -i 's|^        time = NULL; \\$|        { clock_gettime(CLOCK_REALTIME, \&ts[0]); ts[1] = ts[0]; time = ts; } \\|' "$SRC/Modules/posixmodule.c"
grep -q 'clock_gettime(CLOCK_REALTIME, &ts\[0\]); ts\[1\] = ts\[0\]' "$SRC/Modules/posixmodule.c" || die "posixmodule.c: utime patch did not apply"

# ---------------------------------------------------------------- toolchain
SYSROOT=$W/sysroot
mkdir -p "$SYSROOT/include" "$SYSROOT/lib" "$W/bin"
ln -sfn /usr/include/wasm32-wasi "$SYSROOT/include/wasm32-wasi"
ln -sfn /usr/lib/wasm32-wasi "$SYSROOT/lib/wasm32-wasi"
cat >"$W/bin/wasm32-wasi-clang" <<EOF
#!/bin/sh
exec clang-19 --target=wasm32-wasi --sysroot=$SYSROOT "\$@"
EOF
chmod +x "$W/bin/wasm32-wasi-clang"
WCC=$W/bin/wasm32-wasi-clang
export SOURCE_DATE_EPOCH=1700000000

# ---------------------------------------------------------------- sqlite (wasm)
# The amalgamation from the npm registry (see the header), then libsqlite3.a,
# each cached under $CACHE_ROOT by its own inputs.
SQLITE_PKG=better-sqlite3-12.11.1.tgz # SQLite 3.53.2
SQLITE_PKG_SHA256=ebf0ed75a7a59dbcb3b24bbd014ef49d9f15bc328e4adcbf516f2a8fadfa2835
SQLITE_URL=https://registry.npmjs.org/better-sqlite3/-/$SQLITE_PKG
# -Os, not -O2: 1.05 MB of code instead of 1.63 MB, and every Runner pays for
# each byte when wazero loads and validates the module (see BENCHMARKS.md).
SQLITE_FLAGS=(-Os '-DSQLITE_DEFAULT_UNIX_VFS="unix-none"' -DSQLITE_TEMP_STORE=2
	-DSQLITE_OMIT_AUTOINIT -DSQLITE_ENABLE_FTS4 -DSQLITE_ENABLE_FTS5
	-DSQLITE_ENABLE_RTREE -DSQLITE_ENABLE_MATH_FUNCTIONS)
SQLITE_TGZ=$CACHE_ROOT/dl/$SQLITE_PKG
if ! echo "$SQLITE_PKG_SHA256  $SQLITE_TGZ" | sha256sum -c --status 2>/dev/null; then
	log "downloading $SQLITE_URL"
	mkdir -p "$CACHE_ROOT/dl"
	curl -fsSL --retry 3 -o "$SQLITE_TGZ.part" "$SQLITE_URL" ||
		die "could not download $SQLITE_URL (the npm registry must be reachable, or put the file at $SQLITE_TGZ)"
	echo "$SQLITE_PKG_SHA256  $SQLITE_TGZ.part" | sha256sum -c --status ||
		die "$SQLITE_URL: sha256 is $(sha256sum "$SQLITE_TGZ.part" | cut -d' ' -f1), want $SQLITE_PKG_SHA256"
	mv -f "$SQLITE_TGZ.part" "$SQLITE_TGZ"
fi
SQLITE_KEY=$(printf '%s\n' "$SQLITE_PKG_SHA256" "${SQLITE_FLAGS[@]}" "$(clang-19 --version | head -n1)" \
	"$(dpkg-query -W -f='${Version}' wasi-libc)" | sha256sum | cut -d' ' -f1)
SQCACHE=$CACHE_ROOT/sqlite/$SQLITE_KEY
SQPREFIX=$W/sqprefix # a copy inside $W: sysconfigdata records the paths given to configure
rm -rf "$W/sqlite" "$SQPREFIX" && mkdir -p "$W/sqlite" "$SQPREFIX/include" "$SQPREFIX/lib"
if [[ -f $SQCACHE/.complete ]]; then
	log "libsqlite3.a cached in $SQCACHE"
else
	log "building SQLite for wasm32-wasi (one file, about 30 s of CPU)"
	(
		cd "$W/sqlite"
		tar -xzf "$SQLITE_TGZ" --strip-components=3 package/deps/sqlite3/sqlite3.c package/deps/sqlite3/sqlite3.h
		"$WCC" "${SQLITE_FLAGS[@]}" -ffile-prefix-map="$W=/rlm-build" -c sqlite3.c -o sqlite3.o
		llvm-ar-19 rcs libsqlite3.a sqlite3.o
		# Into place in one rename, so a concurrent or interrupted
		# build never leaves a half-written cache entry.
		mkdir -p "$CACHE_ROOT/sqlite" && rm -rf "$SQCACHE.tmp$$" && mkdir "$SQCACHE.tmp$$"
		cp libsqlite3.a sqlite3.h "$SQCACHE.tmp$$/" && touch "$SQCACHE.tmp$$/.complete"
		rm -rf "$SQCACHE" && mv "$SQCACHE.tmp$$" "$SQCACHE"
	) >"$W/sqlite.log" 2>&1 || { tail -n 30 "$W/sqlite.log" >&2; die "SQLite build failed (log: $W/sqlite.log)"; }
	log "SQLite built, cached in $SQCACHE"
fi
cp "$SQCACHE/sqlite3.h" "$SQPREFIX/include/"
cp "$SQCACHE/libsqlite3.a" "$SQPREFIX/lib/"

# ---------------------------------------------------------------- zlib (wasm)
log "building zlib for wasm32-wasi"
ZPREFIX=$W/zprefix
(
	cd "$W/zlib"
	CC=$WCC AR=llvm-ar-19 RANLIB=llvm-ranlib-19 CFLAGS="-O2" CHOST=wasm32 \
		./configure --static --prefix="$ZPREFIX" >"$W/zlib.log" 2>&1
	make -j"$JOBS" libz.a >>"$W/zlib.log" 2>&1
	mkdir -p "$ZPREFIX/include" "$ZPREFIX/lib"
	cp zlib.h zconf.h "$ZPREFIX/include/"
	cp libz.a "$ZPREFIX/lib/"
) || { tail -n 30 "$W/zlib.log" >&2; die "zlib build failed (log: $W/zlib.log)"; }

# ---------------------------------------------------------------- bzip2, liblzma (wasm)
# Only the libraries, compiled file by file: no configure (xz's takes minutes
# on a loaded 2-core machine, and neither tool nor documentation is wanted).
# liblzma's config.h is what xz's configure finds for wasm32-wasi with
# --disable-threads, and the sources are its single-threaded liblzma_la list.
log "building libbz2 and liblzma for wasm32-wasi (seconds)"
BZPREFIX=$W/bzprefix
(
	cd "$W/bzip2"
	mkdir -p "$BZPREFIX/include" "$BZPREFIX/lib"
	for f in blocksort huffman crctable randtable compress decompress bzlib; do
		"$WCC" -O2 -D_FILE_OFFSET_BITS=64 -c "$f.c" -o "$f.o"
	done
	llvm-ar-19 rcs "$BZPREFIX/lib/libbz2.a" blocksort.o huffman.o crctable.o randtable.o compress.o decompress.o bzlib.o
	cp bzlib.h "$BZPREFIX/include/"
) >"$W/bzip2.log" 2>&1 || { tail -n 30 "$W/bzip2.log" >&2; die "bzip2 build failed (log: $W/bzip2.log)"; }
XZPREFIX=$W/xzprefix
(
	cd "$W/xz"
	sed -i 's|^#if !(defined(_WIN32) \&\& !defined(__CYGWIN__))$|& \&\& !defined(__wasi__)|' src/common/mythread.h
	grep -q '!defined(__CYGWIN__)) && !defined(__wasi__)' src/common/mythread.h
	cat >config.h <<'CFG'
/* What xz's configure finds for wasm32-wasi with --disable-threads, cut to
   what liblzma reads. */
#define _GNU_SOURCE 1
#define NDEBUG 1
#define PACKAGE_NAME "XZ Utils"
#define PACKAGE_URL "https://tukaani.org/xz/"
#define ASSUME_RAM 128
#define SIZEOF_SIZE_T 4
#define HAVE_STDBOOL_H 1
#define HAVE__BOOL 1
#define HAVE_INTTYPES_H 1
#define HAVE_STDINT_H 1
#define HAVE_LIMITS_H 1
#define HAVE_STRING_H 1
#define HAVE_STRINGS_H 1
#define HAVE_UNISTD_H 1
#define HAVE_VISIBILITY 1
#define HAVE___BUILTIN_ASSUME_ALIGNED 1
#define HAVE___BUILTIN_BSWAPXX 1
#define TUKLIB_PHYSMEM_SYSCONF 1
#define HAVE_CHECK_CRC32 1
#define HAVE_CHECK_CRC64 1
#define HAVE_CHECK_SHA256 1
#define HAVE_ENCODERS 1
#define HAVE_DECODERS 1
#define HAVE_LZIP_DECODER 1
#define HAVE_MF_HC3 1
#define HAVE_MF_HC4 1
#define HAVE_MF_BT2 1
#define HAVE_MF_BT3 1
#define HAVE_MF_BT4 1
CFG
	for f in LZMA1 LZMA2 DELTA X86 POWERPC IA64 ARM ARMTHUMB ARM64 SPARC; do
		printf '#define HAVE_ENCODER_%s 1\n#define HAVE_DECODER_%s 1\n' "$f" "$f"
	done >>config.h
	cd src
	SRCS="common/tuklib_physmem.c"
	for f in common/{common,block_util,easy_preset,filter_common,hardware_physmem,index,stream_flags_common,string_conversion,vli_size} \
		common/{alone_encoder,block_buffer_encoder,block_encoder,block_header_encoder,easy_buffer_encoder,easy_encoder,easy_encoder_memusage,filter_buffer_encoder,filter_encoder,filter_flags_encoder,index_encoder,stream_buffer_encoder,stream_encoder,stream_flags_encoder,vli_encoder,microlzma_encoder} \
		common/{alone_decoder,auto_decoder,block_buffer_decoder,block_decoder,block_header_decoder,easy_decoder_memusage,file_info,filter_buffer_decoder,filter_decoder,filter_flags_decoder,index_decoder,index_hash,stream_buffer_decoder,stream_decoder,stream_flags_decoder,vli_decoder,microlzma_decoder,lzip_decoder} \
		check/{check,crc32_table,crc32_fast,crc64_table,crc64_fast,sha256} lz/{lz_encoder,lz_encoder_mf,lz_decoder} \
		lzma/{lzma_encoder_presets,lzma_encoder,lzma_encoder_optimum_fast,lzma_encoder_optimum_normal,fastpos_table,lzma_decoder,lzma2_encoder,lzma2_decoder} \
		rangecoder/price_table delta/{delta_common,delta_encoder,delta_decoder} \
		simple/{simple_coder,simple_encoder,simple_decoder,x86,powerpc,ia64,arm,armthumb,arm64,sparc}; do
		SRCS="$SRCS liblzma/$f.c"
	done
	mkdir -p obj
	printf '%s\n' $SRCS | xargs -P "$JOBS" -I{} sh -c 'o=obj/$(echo "$1" | tr / _); exec "$0" -O2 -fvisibility=hidden -DHAVE_CONFIG_H -DTUKLIB_SYMBOL_PREFIX=lzma_ -I.. -Iliblzma/api -Iliblzma/common -Iliblzma/check -Iliblzma/lz -Iliblzma/rangecoder -Iliblzma/lzma -Iliblzma/delta -Iliblzma/simple -Icommon -c "$1" -o "${o%.c}.o"' "$WCC" {}
	mkdir -p "$XZPREFIX/include" "$XZPREFIX/lib"
	llvm-ar-19 rcs "$XZPREFIX/lib/liblzma.a" obj/*.o
	cp -R liblzma/api/lzma.h liblzma/api/lzma "$XZPREFIX/include/"
) >"$W/xz.log" 2>&1 || { tail -n 30 "$W/xz.log" >&2; die "liblzma build failed (log: $W/xz.log)"; }

# ---------------------------------------------------------------- build python
# Debian's python3.11 serves as the build python (it runs the freezers and
# compiles the stdlib pycs): same bytecode and marshal format as the target.
BUILDPY=/usr/bin/python3.11
[[ -x $BUILDPY ]] || die "$BUILDPY missing (apt-get install python3.11)"
"$BUILDPY" -c 'import sys, zlib, zipfile, py_compile; assert sys.version_info[:2] == (3, 11), sys.version' ||
	die "$BUILDPY is not a usable Python 3.11"

# ---------------------------------------------------------------- python.wasm
log "CPython for wasm32-wasi (configure, then make: most of the build)"
SITE=$W/config.site-wasm32-wasi
cp "$SRC/Tools/wasm/config.site-wasm32-wasi" "$SITE"
cat >>"$SITE" <<'EOF'

# rlm: wazero rejects absolute-time sleeps (TIMER_ABSTIME); use nanosleep.
ac_cv_func_clock_nanosleep=no
ac_cv_lib_rt_clock_nanosleep=no
EOF
mkdir -p "$W/wasi"
(
	cd "$W/wasi"
	CONFIG_SITE=$SITE \
		CC=$WCC AR=llvm-ar-19 RANLIB=llvm-ranlib-19 \
		CFLAGS="-O2 -ffile-prefix-map=$W=/rlm-build -Wno-error=int-conversion -Wno-error=incompatible-function-pointer-types" \
		ZLIB_CFLAGS="-I$ZPREFIX/include" ZLIB_LIBS="-L$ZPREFIX/lib -lz" \
		BZIP2_CFLAGS="-I$BZPREFIX/include" BZIP2_LIBS="-L$BZPREFIX/lib -lbz2" \
		LIBLZMA_CFLAGS="-I$XZPREFIX/include" LIBLZMA_LIBS="-L$XZPREFIX/lib -llzma" \
		LIBSQLITE3_CFLAGS="-I$SQPREFIX/include" LIBSQLITE3_LIBS="-L$SQPREFIX/lib -lsqlite3" \
		PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$W/no-pkgconfig \
		../src/configure --host=wasm32-unknown-wasi --build="$("$SRC/config.guess")" \
		--with-build-python="$BUILDPY" --prefix=/usr/local \
		--disable-ipv6 --disable-test-modules --without-ensurepip \
		>"$W/wasi.log" 2>&1
	make -j"$JOBS" python.wasm >>"$W/wasi.log" 2>&1
	# sysconfigdata for the zip; not needed to run, so not fatal.
	make pybuilddir.txt >>"$W/wasi.log" 2>&1 || echo "pybuilddir.txt failed" >>"$W/wasi.log"
) || { tail -n 40 "$W/wasi.log" >&2; die "wasm build failed (log: $W/wasi.log)"; }
OUT=$W/out
rm -rf "$OUT" && mkdir -p "$OUT"
llvm-strip-19 -o "$OUT/python.wasm" "$W/wasi/python.wasm"

# ---------------------------------------------------------------- stdlib zip
log "building the stdlib zip (sources, pycs, tzdata)"
SYSCONFIGDATA=$(ls "$W"/wasi/build/lib.*/_sysconfigdata_*.py 2>/dev/null | head -n1 || true)
if [[ -n $SYSCONFIGDATA ]]; then
	# It records the build's absolute paths; make them independent of $W.
	# Substituted in the values and printed again, as sysconfig does: pprint
	# wraps lines by length, so a sed over the file would still depend on $W.
	"$BUILDPY" - "$SYSCONFIGDATA" "$W" "$W/$(basename "$SYSCONFIGDATA")" <<'PYEOF'
import pprint, sys
src, w, out = sys.argv[1:4]
ns = {}
with open(src) as f:
    exec(f.read(), ns)
v = {k: x.replace(w, "/rlm-build") if isinstance(x, str) else x for k, x in ns["build_time_vars"].items()}
with open(out, "w") as f:
    f.write("# system configuration generated and used by the sysconfig module\n")
    f.write("build_time_vars = ")
    pprint.pprint(v, stream=f)
PYEOF
	SYSCONFIGDATA=$W/$(basename "$SYSCONFIGDATA")
fi
TZVERSION=$(basename "$TZDEB" | sed -E 's/^tzdata_([0-9]+[a-z]+).*/\1/')
"$BUILDPY" - "$SRC/Lib" "$OUT/python311.zip" "$SYSCONFIGDATA" "$W/tz/usr/share/zoneinfo" "$TZVERSION" <<'PYEOF'
# The plugin serves this zip as the directory /usr/local/lib/python3.11, so
# the layout is a normal stdlib directory: each module's source beside an
# unchecked-hash pyc in __pycache__ (imports never compile or stat sources, and
# tracebacks, linecache and inspect find the source at the path the pyc names).
# Time zones are the tzdata package zoneinfo falls back to when the system has
# no /usr/share/zoneinfo. Sorted entries with a fixed timestamp keep the zip
# reproducible. Tests, GUI and packaging tools are left out: they cannot work
# under WASI or are not useful in a sandbox.
import os, py_compile, sys, zipfile
lib, out, sysconfigdata, tzroot, tzversion = sys.argv[1:6]
PREFIX = "/usr/local/lib/python3.11/"
SKIP_DIRS = {"test", "tests", "idle_test", "idlelib", "tkinter", "turtledemo",
             "ensurepip", "lib2to3", "venv", "pydoc_data", "__pycache__",
             "site-packages", "unittest/test", "distutils/tests", "ctypes/test",
             "sqlite3/test", "tkinter/test"}
SKIP_FILES = {"turtle.py", "antigravity.py", "this.py"}
entries = []
for root, dirs, files in os.walk(lib):
    rel = os.path.relpath(root, lib)
    rel = "" if rel == "." else rel.replace(os.sep, "/")
    dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and
                     (rel + "/" + d).lstrip("/") not in SKIP_DIRS)
    for f in sorted(files):
        if f.endswith(".py") and f not in SKIP_FILES:
            entries.append((os.path.join(root, f), (rel + "/" + f).lstrip("/")))
if sysconfigdata:
    entries.append((sysconfigdata, os.path.basename(sysconfigdata)))

files = {}  # arcname -> bytes
tmp = out + ".pyc.tmp"
n = 0
for src, arc in entries:
    d, base = os.path.split(arc)
    pyc = (d + "/" if d else "") + "__pycache__/" + base[:-3] + ".cpython-311.pyc"
    try:
        py_compile.compile(src, cfile=tmp, dfile=PREFIX + arc, doraise=True, optimize=0,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    except py_compile.PyCompileError as e:
        print("skip", arc, e.msg.splitlines()[-1], file=sys.stderr)
        continue
    with open(tmp, "rb") as fh:
        files[pyc] = fh.read()
    with open(src, "rb") as fh:
        files[arc] = fh.read()
    n += 1
os.unlink(tmp)

# tzdata: the compiled zones of Debian's tzdata, laid out as PyPI's tzdata
# package (every directory a package, so importlib.resources finds them).
root = os.path.realpath(tzroot)
zones = []
for d, dirs, fs in os.walk(root):
    rel = os.path.relpath(d, root)
    if rel == ".":
        dirs[:] = [x for x in dirs if x not in ("posix", "right")]
    dirs.sort()
    for f in sorted(fs):
        p = os.path.realpath(os.path.join(d, f))
        if not p.startswith(root + os.sep) or not os.path.isfile(p):
            continue  # e.g. localtime -> /etc/localtime
        with open(p, "rb") as fh:
            data = fh.read()
        if not data.startswith(b"TZif"):
            continue
        key = os.path.normpath(os.path.join(rel, f)).replace(os.sep, "/")
        zones.append(key)
        files["tzdata/zoneinfo/" + key] = data
pkgs = {"tzdata", "tzdata/zoneinfo"}
for z in zones:
    parts = z.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        pkgs.add("tzdata/zoneinfo/" + "/".join(parts[:i]))
for p in pkgs:
    files[p + "/__init__.py"] = b""
files["tzdata/__init__.py"] = ("# IANA time-zone data from Debian's tzdata package.\n"
                               "IANA_VERSION = %r\n__version__ = %r\n" % (tzversion, tzversion)).encode()
files["tzdata/zones"] = ("\n".join(sorted(zones)) + "\n").encode()

with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    for arc in sorted(files):
        zi = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
        zi.compress_type = zipfile.ZIP_DEFLATED
        zi.external_attr = 0o644 << 16
        z.writestr(zi, files[arc])
print("stdlib zip: %d modules, %d time zones (tzdata %s)" % (n, len(zones), tzversion), file=sys.stderr)
PYEOF

# ---------------------------------------------------------------- smoke check
# A header check only: running it needs a WASI runtime, which the Go tests provide.
head -c 4 "$OUT/python.wasm" | od -An -tx1 | grep -q '00 61 73 6d' || die "python.wasm is not a wasm module"

(cd "$OUT" && sha256sum python.wasm python311.zip >SHA256SUMS)
{
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "python source: $(basename "$PYTAR")"
	echo "zlib source:   $(basename "$ZTAR")"
	echo "bzip2 source:  $(basename "$BZTAR")"
	echo "xz source:     $(basename "$XZTAR") + $(basename "${XZDEB:-none}")"
	echo "tzdata:        $(basename "$TZDEB")"
	echo "sqlite source: $SQLITE_PKG ($SQLITE_PKG_SHA256) ${SQLITE_FLAGS[*]}"
	echo "build python:  $("$BUILDPY" -c 'import sys; print(sys.version.split()[0])') ($(dpkg-query -W -f='${Version}' python3.11-minimal))"
	echo "clang: $(clang-19 --version | head -n1)"
	echo "wasi-libc: $(dpkg-query -W -f='${Version}' wasi-libc)"
} >"$OUT/BUILDINFO"
mkdir -p "$CACHE"
cp -f "$OUT/python.wasm" "$OUT/python311.zip" "$OUT/SHA256SUMS" "$OUT/BUILDINFO" "$CACHE/"
touch "$CACHE/.complete"
log "cached in $CACHE"
cat "$OUT/SHA256SUMS" >&2
install_assets
if [[ -z ${RLM_WASM_WORK:-} ]]; then
	rm -rf "$W"
fi
