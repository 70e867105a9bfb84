// A scriptable upstream for the console's end-to-end test, on loopback:
//   /pay/...      503 (retryable: the payment-api breaker opens)
//   /crm/...      422 (permanent: asynchronous callouts become dead letters),
//                 200 once POST /__control?crm=ok was called (replays succeed),
//                 422 again after POST /__control?crm=fail
//   /__health     200
import http from 'node:http';

const port = Number(process.argv[2]);
let crmOK = false;

http.createServer((req, res) => {
  const url = new URL(req.url, 'http://upstream');
  req.resume();
  req.on('end', () => {
    if (url.pathname === '/__health') {
      res.writeHead(200).end('ok');
    } else if (url.pathname === '/__control' && req.method === 'POST') {
      crmOK = url.searchParams.get('crm') === 'ok';
      res.writeHead(204).end();
    } else if (url.pathname.startsWith('/pay/')) {
      res.writeHead(503, { 'Content-Type': 'application/json' }).end('{"error":"maintenance"}');
    } else if (url.pathname.startsWith('/crm/')) {
      if (crmOK) {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"ok":true}');
      } else {
        res.writeHead(422, { 'Content-Type': 'text/html' })
          .end('<html><body><script>alert("upstream")</script>rejected</body></html>');
      }
    } else {
      res.writeHead(404).end();
    }
  });
}).listen(port, '127.0.0.1');
