#!/usr/bin/env node
// The `leasehold` command: one entry point that starts each service, a worker, the demo or the audit.
import { Command } from 'commander';
import { usageErrors } from '../platform/flags.js';
import { packageVersion } from '../platform/package-version.js';
import { queueCommand } from '../queue/main.js';
import { gatewayCommand } from '../gateway/main.js';
import { receiverCommand } from '../receiver/main.js';
import { workerCommand } from '../worker/main.js';
import { demoCommand, demoWorkerCommand, mailerCommand, startCommand } from '../demo/main.js';
import { auditCommand } from '../audit/main.js';
import { conformCommand } from '../conform/main.js';

const program = usageErrors(new Command('leasehold'), 'leasehold')
  .description('Fenced leases for job workers: a queue, a fencing gateway and an idempotent receiver.')
  .version(packageVersion(), '-v, --version')
  .enablePositionalOptions();

// Each service registers its own subcommand below (see each folder's main.ts).
program.addCommand(queueCommand());
program.addCommand(gatewayCommand());
program.addCommand(receiverCommand());
program.addCommand(workerCommand());
program.addCommand(demoCommand());
program.addCommand(startCommand());
// The demo's own processes: its second downstream, and its worker (started by the demo only).
program.addCommand(mailerCommand());
program.addCommand(demoWorkerCommand(), { hidden: true });
program.addCommand(auditCommand());
program.addCommand(conformCommand());

// commander's own help command reads `help --help` as help for a command named "--help", and
// answers an unknown name with the whole help on stderr; this one gives its own usage for the
// first, and a usage error that names the command for the second.
program.helpCommand(false);
program
  .command('help [command]')
  .description('display help for command')
  .action((name: string | undefined) => {
    if (name === undefined) return program.help();
    const command = program.commands.find((c) => c.name() === name || c.aliases().includes(name));
    if (command === undefined) {
      return program.error(`error: unknown command '${name}'`, { code: 'commander.unknownCommand' });
    }
    return command.help();
  });

await program.parseAsync(process.argv);
