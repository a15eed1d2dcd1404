// Reading input whose length is only declared — a gzip trailer, a tar header, an IDX header,
// an image header — into memory that follows the bytes actually delivered. A declared size
// is an upper bound to check against, never an allocation: the buffer grows (doubling) as
// data arrives, so a 100-byte file that claims 4 GB costs kilobytes, and the size check
// happens after the stream ran dry (docs/RELIABILITY.md, class 2).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

struct archive;

namespace cae {

// A source of bytes: fills up to `n` bytes of `out`, returns how many (0 at the end); throws
// on a read error.
using ReadSome = std::function<size_t(uint8_t* out, size_t n)>;

// Reads from `read_some` until the end or until `limit` bytes arrived, whichever comes first
// (it never asks for byte limit+1: pass limit + 1 to learn whether a stream is longer than
// it should be). `declared` (0: unknown) is the size the input claims: the buffer jumps to
// it once the bytes read make it plausible (an eighth of it arrived), so a truthful large
// stream is not copied through every doubling. Memory never exceeds 8x the bytes read plus
// 64 KiB, whatever was declared.
// `prefix`: bytes already read (a header), kept at the front and counted in limit and declared.
std::vector<uint8_t> read_growing(const ReadSome& read_some, uint64_t limit, uint64_t declared = 0,
                                  std::vector<uint8_t> prefix = {});

// The data of the libarchive entry just opened by archive_read_next_header, read as above;
// a libarchive error becomes "<name>: <member>: corrupted or truncated archive (...)".
// `declared`: the size the member's header gives.
std::vector<uint8_t> read_archive_member(archive* a, const std::string& name, const std::string& member,
                                         uint64_t limit, uint64_t declared);

// libarchive's message for its last error ("unknown error" where it has none).
std::string archive_message(archive* a);

}  // namespace cae
