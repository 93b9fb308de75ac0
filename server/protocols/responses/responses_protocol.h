// The /v1/responses route as a Protocol (server/protocols/renderer.h): the body is
// translated to the chat request that asks the same (server/protocols/responses/responses_parse.h)
// and prepared by the chat path, so the same engine, bank, batching, limits,
// tenants and metrics serve it; the output is rendered by ResponsesOutput
// (server/protocols/responses/responses_output.h). Errors keep OpenAI's shape; in a stream an
// error is one `error` event.
//
// Thread safety: the Protocol is immutable; its renderers are per request.
#pragma once

#include "server/protocols/renderer.h"

namespace sb {

const Protocol& responses_protocol();

}  // namespace sb
