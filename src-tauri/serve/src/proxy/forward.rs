//! Forwarding one request upstream: its body read under the deadline and the limits, the
//! answer streamed back (or read whole where a receipt is asked), and its record made.

use super::*;

impl Proxy {
    /// Forwards `req`, taking its forwarding permit into `permit` once its body is read.
    pub(super) async fn forward(
        &self,
        req: Request<Incoming>,
        permit: &mut Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Response<ProxyBody> {
        let (mut parts, body) = req.into_parts();
        let route = (parts.method == hyper::Method::POST)
            .then(|| Route::of_post(parts.uri.path()))
            .flatten();
        let path_and_query = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let routing = self.routing(&parts.headers);
        parts.headers.remove(ROUTE_HEADER);
        let wants_receipt = parts
            .headers
            .get(RECEIPT_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| matches!(v.trim(), "1" | "true"));
        parts.headers.remove(RECEIPT_HEADER);
        let required = self.state.borrow().prefs.keys_required;
        let caller = match keyed::caller(&mut parts.headers, &self.keys, required) {
            Ok(caller) => caller,
            Err(refused) => return *refused,
        };
        let wants_receipt = wants_receipt || caller.key.as_ref().is_some_and(|k| k.energy_line);
        let mut clamped = None;
        let mut ticket = keyed::Ticket::new(&self.keys, &caller, Default::default());
        let (body, model, strip_usage, routed) = match route {
            Some(route) => match peek::peek(body, route, routing.as_ref(), &self.held).await {
                Ok(mut peeked) => {
                    let asked = peeked.routed.as_ref().map(|w| &w.requested);
                    if let Some(Err(e)) =
                        asked.or(peeked.model.as_ref()).map(|m| check_model_name(m))
                    {
                        return json_error(StatusCode::BAD_REQUEST, format!("wattbar proxy: {e}"));
                    }
                    if let Some(key) = caller.key.as_ref().filter(|k| k.budgeted) {
                        let published = Arc::clone(&self.state.borrow());
                        let terms = keyed::Terms {
                            key,
                            rates: self.rates(peeked.model.as_deref()),
                            price_per_kwh: published.energy.price_per_kwh,
                            now: self.reporter.unix_now(),
                        };
                        let whole = peeked.whole.clone();
                        match keyed::hold(&self.keys, &terms, route, whole.as_deref(), peeked.size)
                        {
                            Ok(taken) => {
                                if let Some(edited) = taken.body {
                                    peeked.replace(edited);
                                }
                                clamped = taken.clamped;
                                ticket = keyed::Ticket::new(&self.keys, &caller, taken.held);
                            }
                            Err(refused) => {
                                self.reporter.key_refused(key.name.clone());
                                let status = self.keys.status(&key.name, terms.now);
                                return keyed::budget_exceeded(
                                    &refused,
                                    published.prefs.currency.as_str(),
                                    status.as_ref(),
                                    terms.now,
                                );
                            }
                        }
                    }
                    if let Some(length) = peeked.length {
                        parts
                            .headers
                            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
                    }
                    let (model, asked_usage, routed) = (
                        peeked.model.take(),
                        peeked.asked_usage,
                        peeked.routed.take(),
                    );
                    (peeked.into_body(), model, asked_usage, routed)
                }
                Err(PeekError::Body(e)) => {
                    return json_error(
                        StatusCode::BAD_REQUEST,
                        format!("wattbar proxy: reading the request body failed: {e}"),
                    )
                }
                Err(PeekError::Full) => {
                    return busy(format!(
                        "wattbar proxy: {} MiB of request bodies are held already",
                        MAX_HELD_BYTES / (1024 * 1024),
                    ))
                }
                Err(PeekError::Stalled) => {
                    return json_error(
                        StatusCode::REQUEST_TIMEOUT,
                        format!(
                            "wattbar proxy: the request body stalled (no byte for {} s, or not \
                             whole within {} s); what was held of it is released",
                            peek::BODY_STALL.as_secs(),
                            peek::BODY_DEADLINE.as_secs()
                        ),
                    )
                }
            },
            None => (
                body.map_err(BoxError::from).boxed_unsync(),
                None,
                false,
                None,
            ),
        };
        match Arc::clone(&self.forwarding).try_acquire_owned() {
            Ok(p) => *permit = Some(p),
            Err(_) => {
                return busy(format!(
                    "wattbar proxy: {MAX_FORWARDED} requests are already being forwarded"
                ))
            }
        }
        let inflight = route.map(|r| {
            let inflight = self.reporter.begin(r, model);
            match &routed {
                Some(w) if w.rerouted() => inflight.routed_from(w.requested.clone()),
                _ => inflight,
            }
        });
        if let Some(i) = &inflight {
            ticket.attach(i.record_id());
        }
        parts.uri = match self.upstream.uri(&path_and_query) {
            Ok(uri) => uri,
            Err(e) => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    format!("wattbar proxy: {path_and_query:?}: {e}"),
                )
            }
        };
        strip_hop_by_hop(&mut parts.headers);
        parts
            .headers
            .insert(header::HOST, self.upstream.authority.clone());
        let upstream = match self.client.request(Request::from_parts(parts, body)).await {
            Ok(response) => response,
            Err(e) => {
                let message = format!(
                    "wattbar proxy: the model server at {} did not answer: {}",
                    self.upstream,
                    error_chain(&e)
                );
                match inflight {
                    // Never connected: the request never began, so it makes no record.
                    Some(inflight) if e.is_connect() => inflight.abandon(),
                    Some(inflight) => inflight.finish(
                        Status::Error,
                        ServerFigures {
                            error: Some(message.clone()),
                            ..Default::default()
                        },
                    ),
                    None => {}
                }
                return json_error(StatusCode::BAD_GATEWAY, message);
            }
        };
        let (mut parts, body) = upstream.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        if let Some(w) = &routed {
            if let Ok(v) = HeaderValue::from_bytes(w.header().as_bytes()) {
                parts.headers.insert(ROUTED_HEADER, v);
            }
        }
        if let Some(i) = &inflight {
            parts
                .headers
                .insert(REQUEST_ID_HEADER, HeaderValue::from(i.record_id()));
        }
        if let Some(n) = clamped {
            parts.headers.insert(CLAMPED_HEADER, HeaderValue::from(n));
        }
        if let Some(key) = caller.key.as_ref().filter(|k| k.budgeted) {
            let now = self.reporter.unix_now();
            if let Some(status) = self.keys.status(&key.name, now) {
                keyed::ratelimit_headers(&mut parts.headers, &status, now);
            }
        }
        let body = match (route, inflight) {
            (Some(route), Some(inflight)) => {
                let framing = parts
                    .headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map_or(Framing::Json, Framing::of_content_type);
                if wants_receipt && framing == Framing::Json && parts.status.is_success() {
                    return self.whole_with_receipt(parts, body, route, inflight).await;
                }
                let filter = (strip_usage && framing == Framing::Sse).then(|| {
                    parts.headers.remove(header::CONTENT_LENGTH);
                    UsageChunkFilter::default()
                });
                if wants_receipt {
                    parts.headers.remove(header::CONTENT_LENGTH);
                }
                Metered {
                    inner: body,
                    meter: Some(ResponseMeter::new(route, framing)),
                    inflight: Some(inflight),
                    http_status: parts.status,
                    filter,
                    tail: None,
                    done: false,
                    receipt: wants_receipt.then(|| self.engine.clone()),
                    framing,
                    held: None,
                    partial: (wants_receipt && framing == Framing::Sse).then(Vec::new),
                }
                .boxed_unsync()
            }
            _ => body.map_err(BoxError::from).boxed_unsync(),
        };
        Response::from_parts(parts, body)
    }

    /// A whole JSON answer read to its end, its record made, and the answer sent with the
    /// receipt as its last field and the length that includes it.
    pub(super) async fn whole_with_receipt(
        &self,
        mut parts: hyper::http::response::Parts,
        body: Incoming,
        route: Route,
        mut inflight: InFlight,
    ) -> Response<ProxyBody> {
        let id = inflight.record_id();
        inflight.expedite();
        let meter = ResponseMeter::new(route, Framing::Json);
        let mut body = body;
        let failure = match peek::read(&mut body, MAX_ANSWER_BYTES, &self.held).await {
            Ok(read) if read.whole => Ok(read),
            Ok(_) => Err(format!(
                "wattbar proxy: the model server's answer is over {} MiB, too large to read \
                 whole for its receipt; ask without {RECEIPT_HEADER} to have it as it comes",
                MAX_ANSWER_BYTES / (1024 * 1024)
            )),
            Err(PeekError::Body(e)) => Err(format!(
                "wattbar proxy: the model server broke off the answer: {}",
                error_chain(&e)
            )),
            Err(PeekError::Full) => Err(format!(
                "wattbar proxy: {} MiB of bodies are held already, so the answer could not be \
                 read whole for its receipt",
                MAX_HELD_BYTES / (1024 * 1024)
            )),
            Err(PeekError::Stalled) => Err(format!(
                "wattbar proxy: the model server's answer stalled, or was not whole within {} s",
                peek::BODY_DEADLINE.as_secs()
            )),
        };
        let read = match failure {
            Ok(read) => read,
            Err(message) => {
                let (status, figures) =
                    metered::verdict(meter, parts.status, Some(message.clone()));
                inflight.finish(status, figures);
                let mut response = json_error(StatusCode::BAD_GATEWAY, message);
                response
                    .headers_mut()
                    .insert(REQUEST_ID_HEADER, HeaderValue::from(id));
                return response;
            }
        };
        let bytes = read.head;
        let http_status = parts.status;
        // Reading up to 32 MiB of JSON takes a while: off the async workers.
        let verdict = blocking(bytes.clone(), move |bytes| {
            let mut meter = meter;
            meter.feed(bytes);
            metered::verdict(meter, http_status, None)
        })
        .await;
        let (status, figures) = verdict.unwrap_or_else(|| {
            let failure = Some("wattbar proxy: reading the answer failed".to_string());
            metered::verdict(
                ResponseMeter::new(route, Framing::Json),
                http_status,
                failure,
            )
        });
        inflight.finish(status, figures);
        let receipt = metered::receipt(self.engine.clone(), id).await;
        if let Some(line) = &receipt.line {
            for (name, value) in [
                (ENERGY_HEADER, line.energy_json()),
                (COST_HEADER, line.cost_json()),
            ] {
                if let Ok(v) = HeaderValue::from_str(&value) {
                    parts.headers.insert(name, v);
                }
            }
        }
        let out = blocking(bytes.clone(), move |b| receipt.into_object(b))
            .await
            .flatten()
            .map_or(bytes, Bytes::from);
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
        Response::from_parts(parts, peek::holding(full(out), read.held))
    }
}
