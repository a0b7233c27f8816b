//! Who may reach the API: the Host header, loopback and the addresses of this machine.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_refused_with_421() {
    let server = Server::start("t,watts\n0,10\n", None).await;
    let port = server.addr.port();
    for host in [
        format!("evil.example:{port}"),
        "attacker.test".to_string(),
        format!("localhost:{}", port.wrapping_add(1)),
        format!("127.0.0.2:{port}"),
    ] {
        let r = server
            .send("GET", "/v1/snapshot", &[("Host", host.clone())], b"")
            .await;
        assert_eq!(r.status, 421, "{host}: {r:?}");
        assert!(r.json()["error"].as_str().is_some());
    }
    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1".to_string(),
    ] {
        let r = server
            .send("GET", "/v1/low-power", &[("Host", host.clone())], b"")
            .await;
        assert_eq!(r.status, 200, "{host}: {r:?}");
    }
    server.stop().await;
}

/// This machine's interface addresses beyond loopback, as the operating system lists them.
fn machine_addresses() -> Vec<IpAddr> {
    sysinfo::Networks::new_with_refreshed_list()
        .values()
        .flat_map(|n| n.ip_networks().iter().map(|net| net.addr))
        .filter(|ip| !ip.is_loopback())
        .collect()
}

fn host_of(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_listen_answers_to_this_machines_addresses_and_allowed_names() {
    let addresses = machine_addresses();
    let v4: Vec<IpAddr> = addresses.iter().copied().filter(IpAddr::is_ipv4).collect();
    assert!(
        !v4.is_empty(),
        "this test needs a non-loopback IPv4 interface; the machine has {addresses:?}"
    );
    let server = Server::start_with("t,watts\n0,10\n", None, "0.0.0.0:0", |bound, config| {
        config.extra_hosts = api::remote_hosts(bound, &["Prom.Example".to_string()]);
    })
    .await;
    // The power series exist from the first sample on.
    wait_until_sampled(&server).await;
    let port = server.addr.port();
    let metrics = |addr: SocketAddr, host: String| {
        let server = &server;
        async move {
            let r = server
                .send_to(addr, "GET", "/metrics", &[("Host", host.clone())], b"")
                .await;
            (host, r)
        }
    };
    // As a scraper on another machine arrives: to an interface address, naming it.
    for ip in &v4 {
        let to = SocketAddr::new(*ip, port);
        for host in [format!("{ip}:{port}"), ip.to_string()] {
            let (host, r) = metrics(to, host).await;
            assert_eq!(r.status, 200, "{host}: {r:?}");
            assert!(r.body.contains("wattbar_power_watts"), "{host}: {r:?}");
        }
    }
    let mut accepted = vec![format!("prom.example:{port}"), "PROM.EXAMPLE".to_string()];
    accepted.extend(
        addresses
            .iter()
            .map(|ip| format!("{}:{port}", host_of(*ip))),
    );
    if let Some(name) = sysinfo::System::host_name() {
        let label = name.split('.').next().unwrap_or(&name).to_string();
        accepted.extend([format!("{name}:{port}"), format!("{label}.local")]);
    }
    for host in accepted {
        let (host, r) = metrics(server.addr, host).await;
        assert_eq!(r.status, 200, "{host}: {r:?}");
    }
    let to = SocketAddr::new(v4[0], port);
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        format!("{}:{}", v4[0], port.wrapping_add(1)),
        format!("prom.example.evil.example:{port}"),
    ] {
        let (host, r) = metrics(to, host).await;
        assert_eq!(r.status, 421, "{host}: {r:?}");
        assert!(r.json()["error"].as_str().is_some());
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_listen_still_refuses_the_machines_addresses() {
    let addresses = machine_addresses();
    assert!(!addresses.is_empty(), "no non-loopback interface here");
    let server = Server::start_with("t,watts\n0,10\n", None, "127.0.0.1:0", |bound, config| {
        config.extra_hosts = api::remote_hosts(bound, &["proxy.example".to_string()]);
    })
    .await;
    let port = server.addr.port();
    let mut refused: Vec<String> = addresses
        .iter()
        .map(|ip| format!("{}:{port}", host_of(*ip)))
        .collect();
    if let Some(name) = sysinfo::System::host_name() {
        refused.push(format!("{name}:{port}"));
    }
    for host in refused {
        let r = server
            .send("GET", "/metrics", &[("Host", host.clone())], b"")
            .await;
        assert_eq!(r.status, 421, "{host}: {r:?}");
    }
    for host in [format!("localhost:{port}"), format!("proxy.example:{port}")] {
        let r = server
            .send("GET", "/metrics", &[("Host", host.clone())], b"")
            .await;
        assert_eq!(r.status, 200, "{host}: {r:?}");
    }
    server.stop().await;
}
