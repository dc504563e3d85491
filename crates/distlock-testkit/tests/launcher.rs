//! The server launcher, against a real server process (Python's HTTP server).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use distlock_testkit::{LaunchError, Ready, Server, ServerSpec};

fn http_server() -> ServerSpec {
    ServerSpec::new(
        "python3",
        [
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            "{port}",
            "--directory",
            "{dir}",
        ],
    )
    .ready(Ready::TcpConnect)
    .install_hint("apt-get install python3")
}

fn get(server: &Server) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(server.addr())?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

#[test]
fn starts_pauses_resumes_restarts_and_kills() {
    let mut server = Server::start(http_server()).expect("python3 is installed");
    assert!(get(&server).unwrap().starts_with("HTTP/1.0 200"));

    server.pause();
    assert!(get(&server).is_err(), "a paused server does not answer");
    server.resume();
    assert!(get(&server).unwrap().starts_with("HTTP/1.0 200"));

    let port = server.port();
    server.restart().unwrap();
    assert_eq!(server.port(), port, "restart keeps the port");
    assert!(get(&server).unwrap().starts_with("HTTP/1.0 200"));
    assert!(server.log().contains("GET /"), "the log is captured");

    server.kill();
    assert!(TcpStream::connect(server.addr()).is_err());
}

#[test]
fn a_missing_binary_says_how_to_install_it() {
    let spec = ServerSpec::new("distlock-no-such-server", ["--port", "{port}"])
        .install_hint("apt-get install no-such-server");
    let err = Server::start(spec).unwrap_err();
    assert!(matches!(err, LaunchError::Missing { .. }));
    assert!(err.to_string().contains("apt-get install no-such-server"));
}

#[test]
fn a_server_that_never_gets_ready_fails_with_its_log() {
    let spec = ServerSpec::new("sh", ["-c", "echo booting; sleep 30"])
        .ready(Ready::LogLine("ready to accept".into()))
        .startup_timeout(Duration::from_millis(500));
    let err = Server::start(spec).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("did not become ready"), "{text}");
    assert!(text.contains("booting"), "the log tail is shown: {text}");
}
