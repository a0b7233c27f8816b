"""An OTLP/HTTP metrics receiver for the tests: it decodes each push with OpenTelemetry's
official protobuf definitions (the opentelemetry-proto package) and prints it as one JSON line.

Usage: python receiver.py PORT   (0: any free port)
The first line on stdout is {"port": N}; then one line per push:
  {"received_unix", "content_type", "authorization", "resource": {attr: value},
   "metrics": [{"name", "unit", "kind": "sum"|"gauge", "monotonic", "temporality",
                "points": [{"time_unix", "start_unix", "value", "attributes"}]}]}
Each push is answered 200 with an empty ExportMetricsServiceResponse, as a collector does; a
body that does not decode is answered 400 and printed as {"error": ...}.
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality


def any_value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


def point(p):
    kind = p.WhichOneof("value")
    return {
        "time_unix": p.time_unix_nano / 1e9,
        "start_unix": p.start_time_unix_nano / 1e9,
        "value": getattr(p, kind) if kind else None,
        "attributes": attributes(p.attributes),
    }


def metric(m):
    kind = m.WhichOneof("data")
    out = {"name": m.name, "unit": m.unit, "kind": kind}
    if kind == "sum":
        out["monotonic"] = m.sum.is_monotonic
        out["temporality"] = AggregationTemporality.Name(m.sum.aggregation_temporality)
        out["points"] = [point(p) for p in m.sum.data_points]
    elif kind == "gauge":
        out["points"] = [point(p) for p in m.gauge.data_points]
    return out


def decode(body):
    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    resource, metrics = {}, []
    for rm in request.resource_metrics:
        resource.update(attributes(rm.resource.attributes))
        for sm in rm.scope_metrics:
            metrics.extend(metric(m) for m in sm.metrics)
    return {"resource": resource, "metrics": metrics}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            if self.path != "/v1/metrics":
                raise ValueError(f"pushed to {self.path}, not /v1/metrics")
            push = decode(body)
        except Exception as e:  # anything that does not decode is the exporter's fault
            print(json.dumps({"error": str(e)}), flush=True)
            self.send_response(400)
            self.end_headers()
            return
        push["received_unix"] = time.time()
        push["content_type"] = self.headers.get("Content-Type")
        push["authorization"] = self.headers.get("Authorization")
        print(json.dumps(push), flush=True)
        answer = ExportMetricsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def main():
    server = HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
