// Bounds on parsing and rendering a template. Templates come from checkpoint
// files and the values they render from requests: both are untrusted, so no
// input may exhaust the stack, the CPU or memory. Each bound is far above
// what a real chat template needs and ends the render with an error that
// names it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lily::jinja {

// Nesting of values (JSON in, tojson and repr out, comparisons).
inline constexpr int kMaxValueDepth = 256;
// Nesting of expressions and blocks in the template source.
inline constexpr int kMaxSyntaxDepth = 128;
// Nesting of one render: statements, expressions and macro calls together.
inline constexpr int kMaxRenderDepth = 512;
// Statements and expressions evaluated by one render.
inline constexpr uint64_t kMaxRenderSteps = 2'000'000;
// Bytes of any one string a template makes, and of the rendered output.
inline constexpr size_t kMaxStringBytes = size_t(64) << 20;

}  // namespace lily::jinja
