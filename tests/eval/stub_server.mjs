// stub_server.mjs — an OpenAI-compatible endpoint with known answers, for test_eval: tern eval's
// HTTP runner is checked against it so the scores of its answers can be worked out by hand.
// Prints the port it listens on (loopback, chosen by the system), then serves until stdin closes.
// The answer depends on the last user message; tool calls are streamed in fragments as OpenAI
// streams them (index, id and name first, then pieces of the arguments). A request without the
// determinism settings (temperature 0, stream, stream_options.include_usage) gets a 400.
import http from 'node:http';

const answers = {
  'weather in Paris for 2 days': { calls: [['get_weather', ['{"days":', '2.0,"ci', 'ty":"Paris"}']]] },
  'time in UTC and weather in Oslo': { calls: [['get_weather', ['{"city":"Bergen"}']],
                                               ['get_time', ['{"zone"', ':"UTC"}']],
                                               ['get_news', ['{}']]] },
  // a call cut short stays in the content, as tern serve and llama-server return one they cannot parse
  'hi': { content: ['it is ', 'SECRET-123 <tool_call>\n{"name": "get_'], calls: [['get_time', ['{"zone":"SECRET-123"}']]] },
};

function chunk(res, delta, finish = null) {
  res.write(`data: ${JSON.stringify({ id: 'chatcmpl-stub', object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
}

const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    let r;
    try { r = JSON.parse(body); } catch { r = null; }
    const bad = !r || req.url !== '/v1/chat/completions' || r.temperature !== 0 || r.stream !== true ||
      !r.stream_options || r.stream_options.include_usage !== true || !Array.isArray(r.messages);
    if (bad) {
      res.writeHead(400, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'stub: not a determinism-mode request', type: 'invalid_request_error' } }));
      return;
    }
    const user = r.messages.filter((m) => m.role === 'user').pop()?.content ?? '';
    const a = answers[user];
    if (!a) {
      res.writeHead(500, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `stub: no answer for '${user}'`, type: 'server_error' } }));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    chunk(res, { role: 'assistant' });
    let n = 0;
    for (const c of a.content ?? []) { chunk(res, { content: c }); n++; }
    (a.calls ?? []).forEach(([name, parts], index) => {
      chunk(res, { tool_calls: [{ index, id: `call_${index}`, type: 'function', function: { name, arguments: '' } }] });
      for (const p of parts) { chunk(res, { tool_calls: [{ index, function: { arguments: p } }] }); n++; }
    });
    chunk(res, {}, a.calls ? 'tool_calls' : 'stop');
    res.write(`data: ${JSON.stringify({ id: 'chatcmpl-stub', choices: [], usage: { prompt_tokens: 5, completion_tokens: 10 * (n + 1), total_tokens: 0 } })}\n\n`);
    res.end('data: [DONE]\n\n');
  });
});
server.listen(0, '127.0.0.1', () => { console.log(server.address().port); });
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
