//! `wattbar-cli serve`: the engine with the local API, the dashboard and, when asked, the
//! inference proxy. One engine per data folder: a second `serve` on the same folder is refused
//! with who holds it.

use crate::args::Cmd;
use anyhow::{bail, Context, Result};
use wattbar_core::prefs::integrations::{DEFAULT_MQTT_INTERVAL_MS, DEFAULT_OTLP_INTERVAL_MS};
use wattbar_engine::home::paths;
use wattbar_engine::{Command, EngineConfig};
use wattbar_serve::api;
use wattbar_serve::integrations;
use wattbar_serve::mqtt;
use wattbar_serve::otlp;
use wattbar_serve::proxy;

pub async fn serve(command: Cmd) -> Result<()> {
    wattbar_serve::net::raise_open_files_limit();
    let Cmd::Serve {
        listen,
        allow_remote,
        allow_host,
        interval,
        batch,
        ui,
        llm_proxy,
        llm_upstream,
        server_metrics,
        wall,
        mqtt,
        mqtt_password_file,
        mqtt_topic_prefix,
        mqtt_client_id,
        mqtt_interval,
        otlp_endpoint,
        otlp_interval,
    } = command
    else {
        bail!("not a serve command");
    };
    let upstream = match llm_proxy {
        Some(_) => {
            let text = match llm_upstream {
                Some(u) if u.contains("://") => u,
                Some(u) => format!("http://{u}"),
                None => proxy::default_upstream(std::env::var("OLLAMA_HOST").ok().as_deref()),
            };
            Some(proxy::Upstream::parse(&text).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    if let Some(at) = llm_proxy.filter(|a| !api::is_loopback(a) && !allow_remote) {
        bail!(
            "{at} is not a loopback address: anyone who can reach it could use the model server \
             through the proxy. Pass --allow-remote to serve it anyway"
        );
    }
    if !api::is_loopback(&listen) {
        if !allow_remote {
            bail!(
                "{listen} is not a loopback address: anyone who can reach it could read this \
                 machine's power data. Pass --allow-remote to serve it anyway"
            );
        }
        tracing::warn!(
            "serving on {listen}, beyond this machine: reads need no token, writes need the token"
        );
    }
    let token = wattbar_engine::home::secrets::load_or_create(&paths::data_dir()?)?;
    let (prefs, notice) = crate::engine::load_prefs(|m| tracing::warn!("{m}"))?;
    let db = paths::database_path()?;
    let chain = crate::engine::open_sources(wall).await?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let mut config = EngineConfig::new(prefs)
        .with_store(db.clone())
        .finding_model_servers()
        .resting_when_unwatched();
    config.batch_interval = batch;
    config.api = Some(addr.to_string());
    config.advice_file = paths::advice_path().ok();
    config.preferences_file = Some(paths::preferences_path()?);
    config.notice = notice.clone();
    config.server_metrics = server_metrics
        .into_iter()
        .map(|url| wattbar_engine::server_metrics::ServerMetricsConfig {
            url,
            token: None,
            kind: None,
        })
        .collect();
    // The span of a server window; shorter only for the tests, which would otherwise wait
    // tens of seconds for each window to close.
    if let Some(ms) = std::env::var("WATTBAR_SERVER_METRICS_WINDOW_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        config.server_metrics_window = std::time::Duration::from_millis(ms);
    }
    let engine = wattbar_engine::spawn(chain, config)?;
    if let Some(notice) = engine
        .current()
        .kept
        .notice
        .as_ref()
        .filter(|n| Some(*n) != notice.as_ref())
    {
        tracing::warn!("{notice}");
    }
    if let Some(interval) = interval {
        engine.send(Command::SetInterval(interval))?;
    }
    let ui_dir = api::find_ui_dir(ui);
    if ui_dir.is_none() {
        tracing::warn!("the dashboard's files were not found: / answers 404 (pass --ui DIR)");
    }
    tracing::info!("serving on http://{addr}/ (metrics at /metrics)");
    let config = api::ApiConfig {
        token,
        extra_hosts: api::remote_hosts(&addr, &allow_host),
        db_path: Some(db),
        ui_dir,
        ..api::ApiConfig::default()
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        crate::engine::terminated().await;
        let _ = stop_tx.send(true);
    });
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let proxied = match (llm_proxy, upstream) {
        (Some(at), Some(upstream)) => {
            let proxy_listener = tokio::net::TcpListener::bind(at)
                .await
                .with_context(|| format!("the inference proxy cannot listen on {at}"))?;
            upstream
                .refuse_itself(proxy_listener.local_addr()?)
                .await
                .map_err(anyhow::Error::msg)?;
            let origins = proxy::Origins::from_ollama_origins(
                std::env::var("OLLAMA_ORIGINS").ok().as_deref(),
            );
            tracing::info!(
                "inference proxy on http://{} → {upstream}: point clients at it \
                 (OLLAMA_HOST={})",
                proxy_listener.local_addr()?,
                proxy_listener.local_addr()?
            );
            let proxy_hosts = api::remote_hosts(&proxy_listener.local_addr()?, &allow_host);
            let reader = engine.reader();
            let stop = stopped();
            Some(tokio::spawn(async move {
                proxy::serve(
                    proxy_listener,
                    upstream,
                    reader,
                    &proxy_hosts,
                    origins,
                    stop,
                )
                .await
            }))
        }
        _ => None,
    };
    let host = integrations::this_host();
    let follow = integrations::Follow {
        mqtt: mqtt.is_none(),
        otlp: otlp_endpoint.is_none(),
    };
    let mut tasks = vec![tokio::spawn(integrations::follow(
        engine.reader(),
        follow,
        stopped(),
    ))];
    // The flags make the same preferences the app's form does, and go the same way.
    if let Some(url) = mqtt {
        let default_file =
            paths::data_dir()?.join(wattbar_engine::home::secrets::MQTT_PASSWORD_FILE);
        // A file named here is the person's word for this broker; the one kept in the data
        // folder is sent only to the broker it was kept for.
        let password = match mqtt_password_file {
            Some(file) => Some(wattbar_engine::home::secrets::read_secret_file(&file)?),
            None => wattbar_engine::home::mqtt_password_for(&default_file, &url),
        };
        let pref = wattbar_core::MqttPref {
            url,
            topic_prefix: mqtt_topic_prefix,
            client_id: mqtt_client_id,
            interval_ms: mqtt_interval.map_or(DEFAULT_MQTT_INTERVAL_MS, as_ms),
            has_secret: password.is_some(),
            password,
        };
        let c = integrations::mqtt_config(&pref, &host)?;
        tracing::info!(
            "publishing to {} under {}/ (Home Assistant discovery under {}/)",
            c.broker(),
            c.topics.prefix,
            c.topics.discovery
        );
        tasks.push(tokio::spawn(mqtt::run(c, engine.reader(), stopped())));
    }
    let otlp = match otlp_endpoint {
        Some(endpoint) => {
            // As every OpenTelemetry exporter reads them: never on the command line, where
            // `ps` shows them.
            let headers = std::env::var(OTLP_HEADERS_ENV)
                .ok()
                .filter(|h| !h.trim().is_empty());
            let pref = wattbar_core::OtlpPref {
                endpoint,
                interval_ms: otlp_interval.map_or(DEFAULT_OTLP_INTERVAL_MS, as_ms),
                has_secret: headers.is_some(),
                headers,
            };
            let c = integrations::otlp_config(&pref, &host)?;
            tracing::info!(
                "pushing OpenTelemetry metrics to {} every {} s",
                c.endpoint,
                c.interval.as_secs_f64()
            );
            Some(otlp::start(&c, engine.reader())?)
        }
        None => None,
    };
    let served = api::serve(listener, engine.reader(), config, stopped()).await;
    if let Some(proxied) = proxied {
        let _ = proxied.await;
    }
    // The store first: a collector or broker that does not answer must not cost the last batch
    // when the service manager runs out of patience.
    let written = engine
        .shutdown()
        .await
        .context("stopped, but the last batch could not be written");
    if written.is_ok() {
        tracing::info!("stopped; the store is written");
    }
    if let Some(otlp) = otlp {
        otlp.shutdown().await;
    }
    for task in tasks {
        let _ = task.await;
    }
    let served = served.context("the API server failed");
    written?;
    served
}

/// The headers of each OTLP push, as OpenTelemetry's exporters read them.
const OTLP_HEADERS_ENV: &str = "OTEL_EXPORTER_OTLP_HEADERS";

fn as_ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
